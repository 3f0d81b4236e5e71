-- restore: rebuild a room lost with Redis's data from its journal (issuer/restore.go, docs/operations.md
-- "Restoring a room"), in bounded calls. ARGV[3] = step, ARGV[4] = the journaled epoch.
--
--   'begin'  ARGV[5] = the config hash as JSON (an object of strings: field -> value),
--            ARGV[6] = the stats hash as JSON (field -> integer), ARGV[7] = seq (the highest
--            arrival number), ARGV[8] = admno (the highest admission number), ARGV[9] = clock_ms.
--            Refuses ('room_not_empty') a room with any entry: seq > 0, or anything in waiting,
--            priority, active or users -- unless the room is being restored from the same epoch
--            (config field restoring present, epoch = ARGV[4]): then it resumes (every step
--            writes absolute values, so running it again changes nothing twice). A room with a
--            config and no entries (recreated empty after the loss, with a new epoch) is
--            restorable: its config, admits, bucket, stats, ended, unclaimed and laneseqs are
--            replaced (bans and used invites are kept: they may be newer than the loss).
--            Writes the config with state 'paused' and restoring = the state to put back, so
--            until 'finish' no other script reads the room (prelude load_config raises RESTORING,
--            answered 503 room_lost): nobody reads a partly written line, is admitted from it or
--            enters it.
--   'members' ARGV[5] = target (waiting | priority | laneseqs | active | unclaimed | admits | ended
--            | users), ARGV[6 ...] = score/member pairs for the ZSETs, member/value pairs for users
--            (the caller sends at most 1,000 pairs a call). Requires restoring with this epoch.
--   'finish' puts the state back, drops restoring and journals the restored config (a config room
--            event, action 'restore'; requires restoring with this epoch). No step journals entry
--            events: the entries restored are the journal's already.
-- Returns {'OK'} or {'ERROR', code}: room_not_empty, not_restoring.
local step, epoch = ARGV[3], ARGV[4]
local c = redis.call('HMGET', K_CONFIG, 'restoring', 'epoch')
local resuming = c[1] and c[2] == epoch

if step == 'begin' then
  if not resuming then
    if tonumber(redis.call('GET', K_SEQ) or '0') > 0 or redis.call('ZCARD', K_WAITING) > 0 or
        redis.call('ZCARD', K_PRIORITY) > 0 or redis.call('ZCARD', K_ACTIVE) > 0 or
        redis.call('HLEN', K_USERS) > 0 then
      return { 'ERROR', 'room_not_empty' }
    end
    redis.call('DEL', K_CONFIG, K_ADMITS, K_BUCKET, K_STATS, K_ENDED, K_UNCLAIMED, K_LANESEQS)
  end
  local cfg = cjson.decode(ARGV[5])
  local state = cfg.state or 'open'
  if resuming then state = c[1] end
  local fields = {}
  for k, v in pairs(cfg) do
    if k ~= 'state' and k ~= 'restoring' and k ~= 'packed' then
      fields[#fields + 1] = k
      fields[#fields + 1] = tostring(v)
    end
  end
  if #fields > 0 then redis.call('HSET', K_CONFIG, unpack(fields)) end
  redis.call('HSET', K_CONFIG, 'state', 'paused', 'restoring', state, 'epoch', epoch, 'clock_ms', ARGV[9])
  -- the tick places a drawn pre-queue again (scores 1 ... cutoff) from lottery_seed, cutoff and bits
  redis.call('HDEL', K_CONFIG, 'lottery_done_ms', 'packed') -- packed: load_config packs the restored fields
  local stats = {}
  for k, v in pairs(cjson.decode(ARGV[6])) do
    stats[#stats + 1] = k
    stats[#stats + 1] = num(v)
  end
  if #stats > 0 then redis.call('HSET', K_STATS, unpack(stats)) end
  redis.call('SET', K_SEQ, ARGV[7])
  redis.call('SET', K_ADMNO, ARGV[8])
  return { 'OK' }
end

if not resuming then return { 'ERROR', 'not_restoring' } end
if step == 'members' then
  local targets = { waiting = K_WAITING, priority = K_PRIORITY, laneseqs = K_LANESEQS, active = K_ACTIVE,
    unclaimed = K_UNCLAIMED, admits = K_ADMITS, ended = K_ENDED }
  local pairs_ = { unpack(ARGV, 6) }
  if #pairs_ == 0 then return { 'OK' } end
  if ARGV[5] == 'users' then
    redis.call('HSET', K_USERS, unpack(pairs_))
  elseif targets[ARGV[5]] then
    redis.call('ZADD', targets[ARGV[5]], unpack(pairs_))
  else
    return { 'ERROR', 'invalid_input' }
  end
  return { 'OK' }
end
if step == 'finish' then
  redis.call('HSET', K_CONFIG, 'state', c[1])
  redis.call('HDEL', K_CONFIG, 'restoring')
  local j = redis.call('HMGET', K_CONFIG, 'journal_maxlen', 'clock_ms')
  journal_config({ journal = tonumber(j[1]) or 1000000, epoch = epoch, clock = tonumber(j[2]) or 0 }, 'restore')
  return { 'OK' }
end
return { 'ERROR', 'invalid_input' }
