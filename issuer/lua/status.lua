-- status: ARGV[3] = the call's epoch (E: its first token's, issuer/queue.go statusItems), ARGV[4] =
-- the call's claims ('c' at byte k: token k claims its admission, an exchange; any other byte, or
-- none, a status: "" for a call of statuses), then per token two ARGV: user, and ref: the arrival
-- seq from the (already authenticated) waiting token, in decimal as Go's strconv writes it,
-- followed by '/' and the token's epoch when it is not E ("123": epoch E, "123/k2x0": epoch k2x0;
-- two ARGV a token, not four: Redis makes a Lua string of each ARGV on every call; the claims in
-- one string, so a claim's seq is the same string as its admission id's digits). One script
-- call per batch of concurrent exact statuses and exchanges for the room (issuer/batch.go).
-- Each token is answered exactly as if it had run alone, in ARGV order.
-- Read-mostly: it never admits or cleans up. A claim is its one write: an ACTIVE
-- admission still within its arrival window leaves the unclaimed set (once: a repeated
-- claim finds it gone and answers the same), so the tick no longer ends it early; the
-- claim and the answer the exchange mints its token from are one atomic step.
-- Once per call, whatever the batch: the room's config, the lanes' lengths (two ZCARDs: a
-- claim changes neither), every token's score in the public line (one ZMSCORE) and, while the
-- priority lane is not empty, in it (one more), the clock, and the room's estimate figures
-- (eta_figures, only when someone in the batch waits; eta_measure when someone waits for
-- capacity). Per token waiting: one ZRANK (and one ZRANGE when it waits for capacity). The
-- tokens no lane answers: one HMGET of their index entries and two ZMSCOREs of those admissions
-- (active, unclaimed) per call, one ZREM of the call's claims and one journal entry of their
-- events (flush); per token an ended one's ZMSCORE.
local cfg = load_config(false)
if not cfg then return { 'ERROR', 'unknown_room' } end

-- Reply: {'ERROR', code} for the whole call (unknown_room), else one flat list (like enter's: every
-- element of a reply is converted, so what is the same for the whole call is sent once):
--   total_waiting, rate, room_state, eta (the room's figures, eta_figures, when someone in the
--   call waits in a room not closed, else {}),
--   then per token, in ARGV order:
--     'WAITING', seq, position, lane, expiry_ms                   (expiry: eta_expiry, 0: none)
--     or state, seq, jti, at_ms, banned_until_ms, reason          (every other state)
-- (issuer/store/status.go decodeStatus).
-- position is 0 for a WAITING entry in the pre-queue of a shuffle room, its place not drawn yet;
-- lane is 'priority' or 'public';
-- at_ms is the admission's expiry for ACTIVE/EXPIRED (the claim deadline for an
-- admission not claimed in time) and the end time for COMPLETED/REVOKED;
-- banned_until_ms is the end of the user's ban (REVOKED only; 0: none); reason is
-- 'not_claimed' or 'session_ended' for EXPIRED, the room's close reason for CLOSED, else ''.
-- total_waiting counts both lanes; a public entry's position counts the whole priority lane
-- ahead of it.
-- CLOSED (docs/rooms.md#the-end-of-a-sale): an entry of a line that closing ended
-- (closed_line: every entry while the room is closed in effect, and after a
-- reopening those up to closed_seq) that is still waiting, in either lane, or was
-- drained from the line (no admission, no ended record), reads CLOSED with the close
-- reason; at_ms is when the room ended (0 while the end is not recorded yet).
local npri = redis.call('ZCARD', K_PRIORITY)
local total = redis.call('ZCARD', K_WAITING) + npri
local now -- read once, and only where time matters
local function clock()
  now = now or now_ms(cfg)
  return now
end
local fig -- the room's estimate figures, read once (eta_figures)

-- out[n] is the reply's last element (a counter, not #out: the length operator searches).
local out, n = { total, cfg.rate, cfg.state, false }, 4 -- [4] = the figures, set at the end

-- What is the same for every token of the call, worked out once: whether the room shows
-- estimates (not closed), the seqs whose place is not drawn yet (in_prequeue: seq <= pq_to),
-- and the seqs of a line that closing ended (closed_line: every seq while the room is
-- closed in effect, else seq <= closed_seq).
local open = cfg.state ~= 'closed'
local pq_to = -1
if cfg.cutoff then
  if not cfg.drawn_done then pq_to = cfg.cutoff end
elseif cfg.prequeue == 'shuffle' then
  pq_to = math.huge
end
local closed_to = cfg.closed_seq
if not open then closed_to = math.huge end

-- Every token's scores in both lanes, read once (a claim changes neither lane).
local argv, call = ARGV, redis.call -- (locals: a global is a table lookup at every use)
local users, nt = {}, 0
for i = 5, #argv - 1, 2 do
  nt = nt + 1
  users[nt] = argv[i]
end
local scores, pscores
if nt > 0 then
  scores = call('ZMSCORE', K_WAITING, unpack(users))
  if npri > 0 then pscores = call('ZMSCORE', K_PRIORITY, unpack(users)) end
end
-- Each token's seq, epoch and the lane whose score names its entry are worked out once, here: a
-- ref is the seq (tonumber), or the seq, '/' and the token's epoch (odd: k -> {epoch, seq's
-- digits}); token k claims when byte k of ARGV[4] is 'c'. The tokens no lane answers are missed
-- (miss: their users; mk: their token numbers).
local seqs, lanes, miss, mk, odd, e0, claims = {}, {}, {}, {}, {}, argv[3], argv[4]
local hot, slow = {}, false -- hot[k]: token k is a public one waiting in the drawn line; slow: some is not
local current = e0 == cfg.epoch
for k = 1, nt do
  local ref, s = argv[2 * k + 4], scores[k]
  local seq, mine = tonumber(ref), current
  if not seq then
    local sq, e = string.match(ref, '^(-?%d+)/(.*)$')
    seq = tonumber(sq)
    odd[k] = { e, sq }
    mine = e == cfg.epoch
  end
  seqs[k] = seq
  if mine then
    if s and s ~= ref then -- (s == ref: the score, as Redis writes it (%.17g), is the seq's digits)
      s = tonumber(s)
      if s < 0 then s = seq_of_score(cfg, s) end -- a drawn entry's lottery score
    end
    if s and (s == ref or s == seq) then
      lanes[k] = 'public'
    elseif pscores and pscores[k] and tonumber(pscores[k]) == seq then -- (the priority lane is never drawn: its scores are seqs)
      lanes[k] = 'priority'
    else
      local m = #miss + 1
      miss[m], mk[m] = users[k], k
    end
  end
  if lanes[k] == 'public' and seq > closed_to and seq > pq_to then hot[k] = true else slow = true end
end
-- The functions and tables of every token but a hot one (result, waiting, status; the missed
-- tokens' admissions) are made only when a token of the call needs them: a closure costs its
-- upvalues' lookup on every call (these three ≈ 15k redis-server instructions of a status call's
-- 210k).
-- (The block is not indented, so that its lines stay those of the functions.)
local status, flush
local tj, te, td -- token k -> its user's admission (the index), its expiry, its claim deadline
if slow then

tj, te, td = {}, {}, {}
-- The call's writes, its claims', in flush: the claimed admissions leave the unclaimed set in one
-- ZREM, the first write (a freeing one, as keep_clock needs), then their 'exchanged' events go
-- to the journal: journal_entry's lines (kind,seq,user,lane,at,admission,reason,eta), made here
-- from the seq's digits and the time formatted once, in entries of at most JOURNAL_BATCH_MAX
-- (journal_flush). Nothing else in this script journals.
local unclaim, taken, events, at = {}, {}, {}, nil -- jtis to ZREM; jti -> claimed by this call; event lines; now, formatted
flush = function()
  if #unclaim > 0 then
    call('ZREM', K_UNCLAIMED, unpack(unclaim))
    unclaim = {}
    keep_clock(cfg, clock())
  end
  if #events > 0 then
    cfg.journal_buf, cfg.journal_n, events = events, #events, {}
    journal_flush(cfg)
  end
end

-- result appends the reply of a token that does not wait; waiting the reply of one WAITING at pos
-- (0: in the pre-queue, place not drawn yet) in lane, with the position's expiry (the room's
-- figures are read once per call: a few O(log n) reads, two, four more when capacity binds; one
-- more per position waiting for capacity; no write).
local function result(seq, state, jti, at, ban, reason)
  out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5], out[n + 6] = state, seq, jti, at, ban or 0, reason or ''
  n = n + 6
end
local function waiting(seq, pos, lane)
  local expiry = 0
  if open then
    fig = fig or eta_figures(cfg, clock())
    if pos > 0 then expiry = eta_expiry(fig, pos) end
  end
  out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5] = 'WAITING', seq, pos, lane, expiry
  n = n + 5
end

-- own: does admission id j name entry seq (its decimal digits sd) of this epoch? (seq_of(cfg, j)
-- == seq without its pattern match, nor a new string when it does: a jti is
-- "<epoch>.<seq>.<admno>.<admitted_ms>", and sd, "<epoch>." live strings.)
local epfx = cfg.epoch .. '.'
local ne = #epfx
local function own(j, sd)
  if not j then return false end
  local ns = #sd
  return string.sub(j, 1, ne) == epfx and string.sub(j, ne + 1, ne + ns) == sd and string.byte(j, ne + ns + 1) == 46
end
-- status answers token k: its user, seq (its digits sd), epoch and claim; lane is the lane whose
-- score names its entry (read above), or nil.
status = function(k, user, seq, sd, epoch, claim, lane)
  -- A token of an earlier epoch names an entry lost with the room's data (invariant 6).
  if epoch ~= cfg.epoch then return result(seq, 'NOT_FOUND', '', 0) end

  if lane then
    if seq <= closed_to then
      local why = closed_line(cfg, seq)
      if why then return result(seq, 'CLOSED', '', cfg.ended, 0, why) end
    end
    if lane == 'public' then
      if seq <= pq_to then return waiting(seq, 0, 'public') end -- place not drawn yet
      return waiting(seq, npri + redis.call('ZRANK', K_WAITING, user) + 1, 'public')
    end
    return waiting(seq, redis.call('ZRANK', K_PRIORITY, user) + 1, 'priority')
  end
  local now = clock()
  local j = tj[k]
  -- The index names this entry's admission only while it is the user's current one; after a
  -- re-entry it names the new admission, not ours.
  local mine = own(j, sd) and j or ''
  if mine ~= '' then
    local e = te[k]
    if e then
      e = tonumber(e)
      local d = td[k]
      d = d and not taken[j] and tonumber(d) -- claimed by this call: gone, as a later call would find it
      if d and d <= now then return result(seq, 'EXPIRED', j, d, 0, 'not_claimed') end
      if e <= now then return result(seq, 'EXPIRED', j, e, 0, 'session_ended') end
      if claim then
        if d then
          taken[j] = true
          unclaim[#unclaim + 1] = j
        end
        if cfg.journal > 0 then
          at = at or num(now)
          local m = #events + 1
          events[m] = 'exchanged,' .. sd .. ',' .. user .. ',,' .. at .. ',' .. j .. ',,'
          if m >= JOURNAL_BATCH_MAX then flush() end
        end
      end
      return result(seq, 'ACTIVE', j, e)
    end
  end
  local kind, at = ended(cfg, seq)
  if kind == 'C' then return result(seq, 'COMPLETED', mine, at) end
  if kind == 'R' then
    local b = tonumber(redis.call('ZSCORE', K_BANS, user) or '0')
    if b <= now then b = 0 end
    return result(seq, 'REVOKED', mine, at, b)
  end
  if kind == 'E' then return result(seq, 'EXPIRED', mine, at, 0, 'session_ended') end
  if kind == 'N' then return result(seq, 'EXPIRED', mine, at, 0, 'not_claimed') end
  -- Drained from a closed line (a left entry whose record was trimmed reads so too).
  if not kind and seq <= cfg.closed_seq then
    return result(seq, 'CLOSED', '', cfg.ended, 0, cfg.close_reason ~= '' and cfg.close_reason or 'closed')
  end
  return result(seq, 'NOT_FOUND', '', 0)
end

end -- if slow
-- The missed tokens: their users' index entries (one HMGET), and those admissions' expiries and
-- claim deadlines (one ZMSCORE each), read once.
if #miss > 0 then
  local js, jl, jk = call('HMGET', K_USERS, unpack(miss)), {}, {}
  for m = 1, #miss do
    local j = js[m]
    if j then
      local i = #jl + 1
      tj[mk[m]], jl[i], jk[i] = j, j, mk[m]
    end
  end
  if #jl > 0 then
    local e, d = call('ZMSCORE', K_ACTIVE, unpack(jl)), call('ZMSCORE', K_UNCLAIMED, unpack(jl))
    for i = 1, #jl do te[jk[i]], td[jk[i]] = e[i], d[i] end
  end
end
-- The hot path, a public token waiting in the drawn line, inline: its ZRANK and its reply, with
-- eta_expiry's answers that need no command worked out here: 0 for a position no admission's
-- end frees (j <= 0) and, while nobody is admitted (live 0), for every position (j - ceil(j /
-- capacity) * capacity < 1), once the history is measured (eta_measure: the figures show it).
for k = 1, nt do
  local seq = seqs[k]
  if hot[k] then
    local pos, ex = npri + call('ZRANK', K_WAITING, users[k]) + 1, 0
    if open then
      fig = fig or eta_figures(cfg, clock())
      local j = pos - fig[2] + fig[3]
      if j > 0 then
        if fig[3] == 0 and fig[2] > 0 then eta_measure(fig) else ex = eta_expiry(fig, pos) end
      end
    end
    out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5] = 'WAITING', seq, pos, 'public', ex
    n = n + 5
  else
    local o, ref = odd[k], argv[2 * k + 4]
    local claim = string.byte(claims, k) == 99
    if o then status(k, users[k], seq, o[2], o[1], claim, lanes[k]) else status(k, users[k], seq, ref, e0, claim, lanes[k]) end
  end
end
out[4] = fig or {}
if flush then flush() end
return out
