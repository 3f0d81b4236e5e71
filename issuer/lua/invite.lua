-- invite: one user enters with a verified invite (issuer/invite.go checked its
-- signature, type, issuer, audience, room and user; docs/rooms.md#priority-lanes-and-invites).
-- ARGV[3] = user, ARGV[4] = lane ('priority' or 'bypass'), ARGV[5] = the
-- invite's id (jti) when it is single use, else '', ARGV[6] = the invite's
-- expiry (ms), judged here by the room's clock (now_ms).
--
-- In order (validate first, write after):
--   * deleted room → room_deleted (unknown_room); closed room → room_closed; expired invite → invite_expired; banned user
--     → refused as enter refuses (3, banned_until_ms);
--   * the user already waits in the priority lane, or holds a live admission:
--     that entry is answered and the invite is not used (a repeated enter with
--     the same invite answers the same entry);
--   * a single-use invite already used (a member of invites) → invite_used;
--   * else the invite is used (single use: ZADD to invites, so exactly one of
--     any number of concurrent enters with it gets here) and the user, if
--     waiting in the public line, leaves it (the public entry is superseded:
--     its waiting token reads NOT_FOUND), then gets a new arrival seq and
--       - bypass: is admitted at once when the room is open and capacity and
--         rate allow (the same limits as the tick: the order database's promise
--         holds), even with others waiting;
--       - otherwise (priority, or a bypass that does not fit now): joins the
--         tail of the priority lane — nobody already in a lane is ever put
--         behind a newcomer, so FIFO by seq holds within each lane.
-- The reply is enter's for one user: {created, rate, room_state, epoch, eta (the room's
-- figures, eta_figures; {} unless WAITING), then 4, seq, position, total_waiting,
-- expiry_ms (WAITING, priority lane; expiry: eta_expiry) or 2, seq, total_waiting, jti,
-- expiry_ms (ACTIVE) or 3, banned_until_ms}, or {'ERROR', code}.
local cfg, created = load_config(true, clear_freed) -- a freed auto room's name is free
if not cfg then return { 'ERROR', 'unknown_room' } end
if cfg.deleted > 0 then return { 'ERROR', 'room_deleted' } end -- kept for its retention only
if cfg.state == 'closed' then return { 'ERROR', 'room_closed' } end
local user, lane, id, iexp = ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[6])
local now = now_ms(cfg)
if not iexp or iexp <= now then return { 'ERROR', 'invite_expired' } end

local out = { created, cfg.rate, cfg.state, cfg.epoch, {} }
local function total()
  return redis.call('ZCARD', K_WAITING) + redis.call('ZCARD', K_PRIORITY)
end
-- waiting_reply answers WAITING at pos in the priority lane, with the estimate's figures.
local function waiting_reply(s, pos)
  local eta = eta_figures(cfg, now)
  out[5] = eta
  out[#out + 1] = 4; out[#out + 1] = s; out[#out + 1] = pos; out[#out + 1] = total()
  out[#out + 1] = eta_expiry(eta, pos)
  return out
end

local b = redis.call('ZSCORE', K_BANS, user)
if b and tonumber(b) > now then
  out[#out + 1] = 3; out[#out + 1] = tonumber(b)
  return out
end

local p = redis.call('ZSCORE', K_PRIORITY, user)
if p then
  return waiting_reply(tonumber(p), redis.call('ZRANK', K_PRIORITY, user) + 1)
end
local j = redis.call('HGET', K_USERS, user)
local js, e
if j then
  js = seq_of(cfg, j)
  e = redis.call('ZSCORE', K_ACTIVE, j)
  if js and e and live_admission(j, e, now) then
    out[#out + 1] = 2; out[#out + 1] = js; out[#out + 1] = total(); out[#out + 1] = j; out[#out + 1] = tonumber(e)
    return out
  end
end
if id ~= '' and redis.call('ZSCORE', K_INVITES, id) then return { 'ERROR', 'invite_used' } end

-- Writes. Frees first (see keep_clock): the lapsed index, the public entry.
if j then drop_lapsed_index(cfg, user, j, js, e, now) end -- as enter.lua cleans it
local old = redis.call('ZSCORE', K_WAITING, user)
if old then -- a public place is superseded by the lane's: that entry ends as left (journal reason 'invite')
  redis.call('ZREM', K_WAITING, user)
  journal_entry(cfg, 'left', seq_of_score(cfg, old), now, user, '', '', 'invite')
end
if id ~= '' then redis.call('ZADD', K_INVITES, num(iexp), id) end
redis.call('HINCRBY', K_STATS, 'invites_used', 1)
local seq = redis.call('INCR', K_SEQ)
redis.call('ZADD', K_LANESEQS, seq, seq) -- (snapshot.lua answers lane entries exactly)

if lane == 'bypass' and cfg.state == 'open' and live_count(now) < cfg.capacity then
  local budget, tokens = rate_budget(cfg, now)
  if budget >= 1 then
    keep_clock(cfg, now)
    rate_consume(tokens, 1, now)
    journal_entry(cfg, 'entered', seq, now, user, 'bypass')
    local jti, exp = admit(cfg, user, seq, now, 'bypass')
    redis.call('HINCRBY', K_STATS, 'admitted', 1)
    redis.call('HINCRBY', K_STATS, 'bypassed', 1)
    note_peak(now)
    out[#out + 1] = 2; out[#out + 1] = seq; out[#out + 1] = total(); out[#out + 1] = jti; out[#out + 1] = exp
    journal_flush(cfg)
    return out
  end
end
redis.call('ZADD', K_PRIORITY, num(seq), user)
journal_entry(cfg, 'entered', seq, now, user, 'priority') -- a bypass invite that waits waits here
journal_flush(cfg)
return waiting_reply(seq, redis.call('ZCARD', K_PRIORITY))
