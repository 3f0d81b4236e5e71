-- enter.lua: POST /v1/rooms/{room}/enter (the URL given to wrk), every
-- request as a new user: X-User-ID = args[1] .. "-" .. thread number .. "-" .. counter.
wrk.method = "POST"
local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("id", #threads)
end

function init(args)
  prefix = (args[1] or "u") .. "-" .. id .. "-"
  counter = 0
end

function request()
  counter = counter + 1
  return wrk.format(nil, nil, { ["X-User-ID"] = prefix .. counter })
end
