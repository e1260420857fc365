-- wrk script: POST one JSON-RPC GetTask (body and version header from the environment).
wrk.method = "POST"
wrk.body = os.getenv("BODY")
wrk.headers["Content-Type"] = "application/json"
local version = os.getenv("A2A_VERSION")
if version and version ~= "" then
  wrk.headers["A2A-Version"] = version
end
