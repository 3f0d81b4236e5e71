-- complete: ARGV[3], ARGV[4], ARGV[5] = user (token sub), jti and minted digest of the first
-- admission; ARGV[6..8] those of the second, and so on (one script call per batch of concurrent
-- completions for the room, issuer/batch.go); KEYS[ROOM_KEYS + i] = the i-th admission's minted key
-- (after the room keys it takes: issuer/store/prelude.go assembleKeys)
-- (fg:{room}:minted:<jti>). Each admission is completed exactly as if it had run alone, in ARGV
-- order: two completions of one jti in a batch are a completion and its repeat.
-- The minted digest: '' when the caller verified the admission token's signature; otherwise the
-- token's digest (issuer.MintedDigest), and the admission is completed only when it equals the
-- minted key's (lua/minted.lua, written when the issuer minted that very token): a token byte for
-- byte as minted is authentic. Any other answers {'ERROR', 'not_minted'} before anything is read
-- or written (the caller then verifies the signature and asks again with '').
-- Atomic check-and-consume, per admission: still active and not expired -> consume, drop the
-- user index (the user may queue again). A repeated completion returns the first result
-- (idempotent under retries, of one admission or of the whole call); expired, revoked, left or
-- unknown admissions are refused (invariant 4), and so is an admission id of an earlier epoch
-- ('stale', invariant 6). A live admission admitted before the room's not_before (Unix s, written
-- by an operator's stop, issuer/stop.go) is refused 'room_stopped': its admitted_ms is the jti's last
-- field, and the token's iat is that time in whole seconds, so this is the edge's iat < not_before.
-- Returns {'ERROR', code} for the whole call (unknown_room), else one reply per admission, in ARGV
-- order: {'COMPLETED', at_ms, repeated} or {'ERROR', code} (issuer/store/complete.go decodeComplete).
--
-- Cost: per call, whatever the batch, the reads of all admissions: one MGET of the minted keys
-- (those with a digest), one ZMSCORE of active, one of unclaimed, one HMGET of users; per
-- admission no command but, for one no longer active, the ended lookup (one ZMSCORE:
-- a live admission has no ended record, every script that writes one drops the admission in the
-- same step) to tell a repeat from a refusal; per call the writes of all admissions it ends: one
-- ZREM active, one ZREM unclaimed (those never claimed), one HDEL users, one ZADD ended, one
-- HINCRBY per counter, and the journal's one XADD (journal_flush).
-- Those writes come after the reads, so the admissions later in the batch read the earlier ones'
-- effects from this script's own tables (gone: admissions ended in this call). Frees first
-- (ZREM, HDEL), then writes (keep_clock, ZADD, HINCRBY, the journal's XADD), as over maxmemory Redis lets a
-- script's later allocating writes through once its first write has freed.
local cfg = load_config(false)
if not cfg then return { 'ERROR', 'unknown_room' } end
local now = now_ms(cfg)
local stop_ms = (tonumber(redis.call('HGET', K_CONFIG, 'not_before')) or 0) * 1000

-- What every admission needs, read once for the call (the writes come at the end, so these are
-- what each admission would read alone, the effects of the earlier ones aside: gone):
-- the minted digests (one MGET), the expiries in active and the claim deadlines (a ZMSCORE each),
-- the users' index entries (one HMGET).
local users, jtis, mkeys, mslot = {}, {}, {}, {}
for i = 3, #ARGV - 2, 3 do
  local k = #users + 1
  users[k], jtis[k] = ARGV[i], ARGV[i + 1]
  if ARGV[i + 2] ~= '' then
    mkeys[#mkeys + 1] = KEYS[ROOM_KEYS + k]
    mslot[k] = #mkeys
  end
end
local minted_digests, expiries, deadlines, index = {}, {}, {}, {}
if #users > 0 then
  if #mkeys > 0 then minted_digests = redis.call('MGET', unpack(mkeys)) end
  expiries = redis.call('ZMSCORE', K_ACTIVE, unpack(jtis))
  deadlines = redis.call('ZMSCORE', K_UNCLAIMED, unpack(jtis))
  index = redis.call('HMGET', K_USERS, unpack(users))
end

local gone = {}                 -- jti -> the ended-record kind of the admissions this call ends
local drop_j, drop_u, drop_n = {}, {}, {} -- ZREM active, HDEL users, ZREM unclaimed
local nd, nn = 0, 0             -- #drop_j, #drop_n
local z = {}                    -- ZADD ended: per end its time and "<kind>:<epoch>.<seq>"
local nows, prefix = journal_at(cfg, now), ':' .. cfg.epoch .. '.' -- (formatted once for the call)
local jon = cfg.journal > 0
local done = { 'COMPLETED', now, 0 } -- every first completion's reply (one table for the call)
local completed, expired = 0, 0

local function complete(k, user, jti, digest)
  if digest ~= '' and minted_digests[mslot[k]] ~= digest then return { 'ERROR', 'not_minted' } end
  local seq, sq = seq_of(cfg, jti)
  if not seq then return { 'ERROR', 'stale' } end
  local g = gone[jti]
  local e
  if not g then e = expiries[k] end
  if not e then
    local kind, at
    if g then kind, at = g, now else kind, at = ended(cfg, seq) end
    if kind == 'C' then return { 'COMPLETED', at, 1 } end
    if kind == 'R' then return { 'ERROR', 'revoked' } end
    if kind == 'E' or kind == 'N' then return { 'ERROR', 'expired' } end
    return { 'ERROR', 'not_found' } -- left ('L'), or unknown
  end
  if stop_ms > 0 and tonumber(string.match(jti, '%.(%d+)$')) < stop_ms then return { 'ERROR', 'room_stopped' } end
  if index[k] ~= jti then return { 'ERROR', 'owner_mismatch' } end
  -- The claim deadline of an admission not claimed yet (nil: claimed, or no window).
  local d = deadlines[k]
  local kind = 'C'
  if tonumber(e) <= now or (d and tonumber(d) <= now) then -- lapsed, or never claimed in time (no token has it then)
    kind = 'E'
    if d then kind = 'N' end -- (drop_admission's verdict)
  end
  gone[jti] = kind
  -- Its ended record (ZADD at the end) and its journal event (buffered until journal_flush), with
  -- the seq as the jti has it (num(seq): the room minted this jti, it is in active).
  nd = nd + 1
  drop_j[nd], drop_u[nd] = jti, user
  z[2 * nd - 1], z[2 * nd] = nows, kind .. prefix .. sq
  if d then nn = nn + 1; drop_n[nn] = jti end
  if kind == 'C' then
    -- journal_entry(cfg, 'completed', sq, now, user, '', jti), built here
    if jon then journal_line(cfg, 'completed,' .. sq .. ',' .. user .. ',,' .. nows .. ',' .. jti .. ',,') end
    completed = completed + 1
    return done
  end
  local reason = 'session_ended'
  if kind == 'N' then reason = 'not_claimed' end
  journal_entry(cfg, 'expired', sq, now, user, '', jti, reason)
  expired = expired + 1
  return { 'ERROR', 'expired' }
end

local out = {}
for k = 1, #users do out[k] = complete(k, users[k], jtis[k], ARGV[3 * k + 2]) end
if nd > 0 then
  redis.call('ZREM', K_ACTIVE, unpack(drop_j))
  if nn > 0 then redis.call('ZREM', K_UNCLAIMED, unpack(drop_n)) end
  redis.call('HDEL', K_USERS, unpack(drop_u))
  keep_clock(cfg, now)
  redis.call('ZADD', K_ENDED, unpack(z))
  if completed > 0 then redis.call('HINCRBY', K_STATS, 'completed', completed) end
  if expired > 0 then redis.call('HINCRBY', K_STATS, 'expired', expired) end
end
journal_flush(cfg)
return out
