-- wrk script: POST one JSON-RPC GetTask (body, version header and an optional
-- credential header from the environment: AUTH_HEADER / AUTH_VALUE).
wrk.method = "POST"
wrk.body = os.getenv("BODY")
wrk.headers["Content-Type"] = "application/json"
local version = os.getenv("A2A_VERSION")
if version and version ~= "" then
  wrk.headers["A2A-Version"] = version
end
local auth_header = os.getenv("AUTH_HEADER")
if auth_header and auth_header ~= "" then
  wrk.headers[auth_header] = os.getenv("AUTH_VALUE")
end
