-- bans: the bans in effect, earliest end first, one page.
-- ARGV[3], ARGV[4] = the cursor: end (ms) and user of the last ban of the
-- previous page ("" and "" for the first page); ARGV[5] = page size (the
-- caller bounds it). A cursor whose ban is gone (lifted, or replaced with
-- another end) resumes after every ban ending at or before its end.
-- Returns {total in effect, then per ban: user, banned_until_ms, "<banned_ms>:<reason>"}.
local cfg = load_config(false)
if not cfg then return { 'ERROR', 'unknown_room' } end
local now = now_ms(cfg)
local start = redis.call('ZCOUNT', K_BANS, '-inf', num(now)) -- ended, not trimmed yet
if ARGV[3] ~= '' then
  local cu = tonumber(ARGV[3])
  local from
  local sc = redis.call('ZSCORE', K_BANS, ARGV[4])
  if sc and tonumber(sc) == cu then
    from = redis.call('ZRANK', K_BANS, ARGV[4]) + 1
  else
    from = redis.call('ZCOUNT', K_BANS, '-inf', num(cu))
  end
  start = math.max(start, from)
end
local rows = redis.call('ZRANGE', K_BANS, start, start + tonumber(ARGV[5]) - 1, 'WITHSCORES')
local out = { redis.call('ZCOUNT', K_BANS, '(' .. num(now), '+inf') }
if #rows == 0 then return out end
local names = {}
for i = 1, #rows, 2 do names[#names + 1] = rows[i] end
local why = redis.call('HMGET', K_BANWHY, unpack(names))
for i = 1, #names do
  out[#out + 1] = names[i]
  out[#out + 1] = tonumber(rows[2 * i])
  out[#out + 1] = why[i] or ''
end
return out
