-- wrk script: GET one task over HTTP+JSON (`GET /rest/tasks/{id}`, the URL given to wrk).
wrk.method = "GET"
wrk.headers["A2A-Version"] = "1.0"
