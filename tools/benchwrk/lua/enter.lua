-- enter.lua: POST /v1/rooms/{room}/enter (the URL given to wrk), every
-- request as a new user: X-User-ID = args[1] .. "-" .. thread number .. "-" .. counter.
-- The request is formatted once (wrk.format, with a marker where the user
-- goes) and split around the marker: request() then costs one string
-- concatenation, not a wrk.format (a headers table and a dozen
-- concatenations), so the generator's own CPU, which shares the machine
-- with the server, stays close to the bare /hello row's.
wrk.method = "POST"
local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("id", #threads)
end

function init(args)
  local marker = "\1USER\1"
  local req = wrk.format(nil, nil, { ["X-User-ID"] = marker })
  local at = req:find(marker, 1, true)
  head = req:sub(1, at - 1) .. (args[1] or "u") .. "-" .. id .. "-"
  tail = req:sub(at + #marker)
  counter = 0
end

function request()
  counter = counter + 1
  return head .. counter .. tail
end
