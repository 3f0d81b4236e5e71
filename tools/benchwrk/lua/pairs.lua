-- pairs.lua: requests carrying a user and a token read from a file, one
-- "user token" pair per line: X-User-ID: user, Authorization: Bearer token.
-- args: file, the number of threads (wrk -t), "cycle" or "once", method.
-- Thread k takes the lines k, k+t, k+2t, …. "cycle" goes round its lines
-- for as long as the run lasts; "once" sends each line once and then stops
-- the thread (a repeated request would take another path), and done()
-- prints "threads out of pairs: N" so the driver can tell that the run's
-- Requests/sec (requests ÷ the whole duration) is only a lower bound.
-- Every request is formatted once, in init: request() returns a string
-- already built, so the generator's own CPU, which shares the machine with
-- the server, stays close to the bare /hello row's.
local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("id", #threads)
end

function init(args)
  local file, nthreads = args[1], tonumber(args[2])
  once = args[3] == "once"
  wrk.method = args[4] or "GET"
  reqs = {}
  local i = 0
  for line in io.lines(file) do
    if i % nthreads == id - 1 then
      local u, t = line:match("^(%S+) (%S+)$")
      if u then
        reqs[#reqs + 1] = wrk.format(nil, nil, { ["X-User-ID"] = u, ["Authorization"] = "Bearer " .. t })
      end
    end
    i = i + 1
  end
  if #reqs == 0 then
    error("pairs.lua: no pairs for thread " .. id .. " in " .. file)
  end
  pos = 0
  out = 0
end

function request()
  pos = pos + 1
  if pos > #reqs then
    pos = 1
    if once then
      out = 1
      wrk.thread:stop()
    end
  end
  return reqs[pos]
end

function done(summary, latency, requests)
  local n = 0
  for _, t in ipairs(threads) do
    if t:get("out") == 1 then n = n + 1 end
  end
  io.write(string.format("threads out of pairs: %d\n", n))
end
