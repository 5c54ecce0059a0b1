-- POST 3 random users (uids 1 to 1e9) to one of 1000 groups, as a form body.
-- Each wrk thread seeds its own generator, so threads send different users.
local seeded = false
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"

request = function()
  if not seeded then
    math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))
    seeded = true
  end
  local path = "/group-user/g" .. math.random(1000)
  local body = string.format("users=[%d,%d,%d]", math.random(1e9), math.random(1e9), math.random(1e9))
  return wrk.format(nil, path, nil, body)
end
