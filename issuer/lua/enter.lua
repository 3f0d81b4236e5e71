-- enter: ARGV[3], ARGV[4], … = users, in arrival order (one script call per
-- batch of concurrent enters for the room, issuer/batch.go). Each user is
-- entered exactly as if it had run alone, in that order: FIFO within the
-- batch is the order of ARGV.
-- Idempotent: a user already waiting or admitted gets the same entry back, so
-- refreshes, double clicks, a user twice in one batch and go-redis retries
-- never create a second place in line (invariant 1).
-- Hot path (new users joining a non-empty line): per batch, whatever its
-- size, HMGET config, two ZCARDs, ZMSCORE and HMGET of all users, GET seq, one
-- ZADD of all newcomers and SET seq (Redis >= 6.2) -- no clock write; for the
-- estimate, once per batch the clock, ZCOUNT and ZCARD (eta_figures) and, when
-- someone in it waits for capacity, HGET and two ZCOUNTs (eta_measure), and for
-- those waiting for capacity one ZRANGE by rank of the expiries the batch's
-- newcomers wait for (eta_expiry reads ahead; again where the ranks wrap around
-- the capacity), per known user one, all O(log n).
--
-- Reply (flat, integers where possible: Redis converts every reply element,
-- so a wide reply costs more than the queue work):
--   created, rate, room_state, epoch, eta (the room's figures, eta_figures, once per
--   batch and only when someone in it waits: else {}),
--   then per user: 1, seq, position, total_waiting, expiry_ms  (WAITING, public line; expiry:
--                                                               eta_expiry; position 0: in the
--                                                               pre-queue, its place not drawn yet)
--              or: 4, seq, position, total_waiting, expiry_ms  (WAITING, priority lane)
--              or: 2, seq, total_waiting, jti, expiry_ms      (ACTIVE)
--              or: 3, banned_until_ms                         (refused: banned)
-- A banned user (a member of bans whose end is still ahead) is refused and
-- nothing of theirs is touched; the check is part of this script, so no
-- enter slips between a ban and its check. A room without bans costs one
-- EXISTS; expired bans are ignored here and trimmed by the tick.
-- Lanes: this script only joins the public line (waiting); a user already
-- in the priority lane (invite.lua) gets that entry back. A public user's
-- position counts the whole priority lane ahead; total_waiting counts both
-- lanes; the fast track needs both empty. A room without a priority lane
-- costs one ZCARD.
local cfg, created = load_config(true, clear_freed) -- a freed auto room's name is free
if not cfg then return { 'ERROR', 'unknown_room' } end
if cfg.deleted > 0 then return { 'ERROR', 'room_deleted' } end -- kept for its retention only
if cfg.state == 'closed' then return { 'ERROR', 'room_closed' } end

local now -- read once, and only where time matters
local function clock()
  now = now or now_ms(cfg)
  return now
end

local users = { unpack(ARGV, 3) }
local waiting = redis.call('ZCARD', K_WAITING) -- kept current as users join
local npri = redis.call('ZCARD', K_PRIORITY) -- the priority lane, all ahead of the public line
local pscores = {}
if npri > 0 then pscores = redis.call('ZMSCORE', K_PRIORITY, unpack(users)) end
local scores = redis.call('ZMSCORE', K_WAITING, unpack(users))
local index = redis.call('HMGET', K_USERS, unpack(users))
local banned = {} -- i -> end of the ban (ms) of users banned now
if redis.call('EXISTS', K_BANS) == 1 then
  local b = redis.call('ZMSCORE', K_BANS, unpack(users))
  for i = 1, #users do
    if b[i] and tonumber(b[i]) > clock() then banned[i] = tonumber(b[i]) end
  end
end
local seq0 = tonumber(redis.call('GET', K_SEQ) or '0')
local seq = seq0 -- the room's count of entries ever created; assigned here, stored at the end
local joined_seq, joined_pos = {}, {} -- user -> seq, position of newcomers, ZADDed at the end
local zadd, nz = {}, 0
local admitted = {} -- user -> {seq, jti, exp} of fast-track admissions in this batch

local eta -- the room's figures, read at the batch's first waiting reply (no fast track follows one)
local out = { created, cfg.rate, cfg.state, cfg.epoch, false } -- [5] = eta, set at the end
local no = 5 -- #out, kept here: the reply grows by 2 or 5 per user
local function waiting_reply(s, pos, tag, ahead)
  eta = eta or eta_figures(cfg, clock())
  local expiry = 0
  if pos > 0 then -- eta_expiry(eta, pos); without a command where it needs none (as status.lua)
    local j = pos - eta[2] + eta[3]
    if j > 0 then
      if eta[3] > 0 or eta[2] <= 0 then expiry = eta_expiry(eta, pos, ahead) elseif not eta.measured then eta_measure(eta) end
    end
  end
  out[no + 1] = tag or 1; out[no + 2] = s; out[no + 3] = pos; out[no + 4] = waiting + npri; out[no + 5] = expiry
  no = no + 5
  return expiry
end
local function active_reply(s, jti, exp)
  out[no + 1] = 2; out[no + 2] = s; out[no + 3] = waiting + npri; out[no + 4] = jti; out[no + 5] = exp
  no = no + 5
end

-- A user with anything in the room (a ban, an entry of this batch, a waiting entry in either lane, an
-- index entry): its reply, and true; false when it is to join as a newcomer (an index entry that
-- named nothing live, cleaned up here).
local function known(i, user)
  if banned[i] then
    out[no + 1] = 3; out[no + 2] = banned[i]
    no = no + 2
    return true
  end
  local w = joined_seq[user]
  if w then waiting_reply(w, joined_pos[user]); return true end
  local a = admitted[user]
  if a then active_reply(a[1], a[2], a[3]); return true end
  local s = scores[i]
  if s then
    local ws = seq_of_score(cfg, s)
    if in_prequeue(cfg, ws) then waiting_reply(ws, 0) else
      waiting_reply(ws, npri + redis.call('ZRANK', K_WAITING, user) + 1)
    end
    return true
  end
  if pscores[i] then -- the priority lane is never drawn: FIFO by seq
    waiting_reply(tonumber(pscores[i]), redis.call('ZRANK', K_PRIORITY, user) + 1, 4)
    return true
  end
  local j = index[i]
  local js = seq_of(cfg, j)
  local e = redis.call('ZSCORE', K_ACTIVE, j)
  if js and e and live_admission(j, e, clock()) then
    active_reply(js, j, tonumber(e))
    return true
  end
  -- The index points at a lapsed admission, at nothing (a zombie, invariant 5) or at an
  -- admission of an earlier epoch (invariant 6): clean it up and let the user queue again.
  keep_clock(cfg, clock())
  drop_lapsed_index(cfg, user, j, js, e, now)
  if eta then eta.ahead = nil end -- (the expiries read ahead may have moved: active changed)
  return false
end

-- Newcomers (the hot path): in_prequeue of a new seq, decided once for the batch; the fast track
-- only in an open room.
local open = cfg.state == 'open'
local pq_all = not cfg.cutoff and cfg.prequeue == 'shuffle'
local pq_upto = -1 -- seq <= pq_upto: in the pre-queue (in_prequeue with a cutoff)
if cfg.cutoff and not cfg.drawn_done then pq_upto = cfg.cutoff end
local jon, jat = cfg.journal > 0, nil -- journaling; the events' time, formatted
for i = 1, #users do
  local user = users[i]
  if not (banned[i] or joined_seq[user] or admitted[user] or scores[i] or pscores[i] or index[i])
      or not known(i, user) then
    seq = seq + 1
    local sq = num(seq) -- (formatted once: the journal's and the ZADD's)
    local fast = false
    -- Fast track: nobody waits in either lane, and capacity and rate allow.
    if open and waiting == 0 and npri == 0 and live_count(clock()) < cfg.capacity then
      local budget, tokens = rate_budget(cfg, now)
      if budget >= 1 then
        journal_entry(cfg, 'entered', sq, now, user, 'public')
        keep_clock(cfg, now)
        rate_consume(tokens, 1, now)
        local jti, exp = admit(cfg, user, seq, now, 'public')
        redis.call('HINCRBY', K_STATS, 'admitted', 1)
        redis.call('HINCRBY', K_STATS, 'fast_track', 1)
        note_peak(now)
        admitted[user] = { seq, jti, exp }
        active_reply(seq, jti, exp)
        fast = true
      end
    end
    if not fast then
      -- seq is larger than every score in the line (lottery scores are negative), so the newcomer
      -- is last; in a shuffle room before it opens, in the pre-queue (position 0: not drawn yet).
      waiting = waiting + 1
      local pos = npri + waiting
      if pq_all or seq <= pq_upto then pos = 0 end
      joined_seq[user], joined_pos[user] = seq, pos
      nz = nz + 2
      zadd[nz - 1], zadd[nz] = sq, user
      local expiry = waiting_reply(seq, pos, nil, #users - i) -- (the rest may join behind it)
      local shown -- the estimate the reply shows, journaled for the estimate-error metric
      if pos > 0 and eta.pace ~= false then shown = eta_shown(cfg, eta, pos, expiry) end
      if jon then -- journal_entry(cfg, 'entered', sq, now, user, 'public', nil, nil, shown), built here
        jat = jat or journal_at(cfg, now)
        journal_line(cfg, 'entered,' .. sq .. ',' .. user .. ',public,' .. jat .. ',,,' .. (shown or ''))
      end
    end
  end
end
if nz > 0 then redis.call('ZADD', K_WAITING, unpack(zadd)) end
if seq > seq0 then redis.call('SET', K_SEQ, num(seq)) end
out[5] = eta or {}
journal_flush(cfg)
return out
