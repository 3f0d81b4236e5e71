-- prelude.lua is prepended to every flashgate script (see issuer/scripts.go): each script gets the
-- definitions it names (issuer/prelude.go assemble). Every definition a script carries costs it a
-- closure per call, so code that a call seldom runs names a definition as cold().name: a script
-- that names it only so defines it on the first such call (prelude.go "Cold pieces").
--
-- KEYS (all share the room's hash tag, so a script touches one Cluster slot):
--   1 config   HASH  state, capacity, rate, session_ms, batch, tick_ms, clock_ms, opens_ms, closes_ms,
--                   epoch (created with the room; see new_epoch), arrival_ms (0 or absent: no arrival window),
--                   prequeue ('fifo', absent: fifo, or 'shuffle'), and the pre-queue lottery's (see draw_lottery):
--                   lottery_seed (secret until the draw), lottery_cutoff, lottery_bits, lottery_ms, lottery_done_ms;
--                   the end of the room (docs/rooms.md#the-end-of-a-sale): closed_seq (the arrival counter when
--                   the room last closed: every entry up to it belongs to a line that closing ended),
--                   close_reason (sold_out | closed | event_ended | deleted, of that close), ended_ms (when
--                   the room ended; absent while it is not closed, or its end not recorded yet: note_end),
--                   deleted_ms (DELETE), retention_ms (0 or absent: the issuer's default), auto ('1': created
--                   by an enter under the default policy, limited in number and deleted when idle)
--   2 waiting  ZSET  user -> arrival seq (strict FIFO: seq comes from the counter below, never ties), or for
--                   an entry drawn by the pre-queue lottery its lottery score (negative; seq_of_score)
--   3 active   ZSET  jti  -> expiry (ms since 1970); jti = "<epoch>.<seq>.<admno>.<admitted_ms>"
--   4 users    HASH  user -> jti of the user's current admission (one live entry per user, invariant 1)
--   5 seq      STRING arrival counter (the enter script advances it, one per entry created)
--   6 admno    STRING admission counter (INCR): admission order, for FIFO audits
--   7 admits   ZSET  jti -> admission time (ms): sliding 60 s log, the rate invariant
--   8 bucket   HASH  tokens, ts: shared token bucket that paces admissions within the minute
--   9 stats    HASH  counters: admitted, fast_track, expired (not_claimed of them), completed, revoked, left,
--                   zombies, peak_active, drawn (pre-queue entries the lottery has placed);
--                   first_admit_ms (the room's first admission: where its measured history begins, see
--                   eta_figures)
--                   (entries ever created = the seq counter)
--  10 ended    ZSET  "<C|R|E|L|N>:<epoch>.<seq>" -> end time (ms): completed / revoked / expired / left /
--                   not claimed (expired unclaimed at the arrival window) entries
--  11 bans     ZSET  user -> end of the user's ban (ms); expired members are trimmed by the tick
--  12 banwhy   HASH  user -> "<banned_ms>:<reason>" of each member of bans
--  13 unclaimed ZSET jti -> claim deadline (ms): admissions not yet claimed by an exchange (the arrival
--                   window: admit below, the claim in status.lua). Admitted users only: a waiting user
--                   costs nothing here, a claimed one nothing either.
--  14 priority ZSET user -> arrival seq: the priority lane (docs/rooms.md#priority-lanes-and-invites), entered
--                   with an invite (invite.lua); seqs from the same counter as waiting's. The tick admits
--                   from it before waiting, within the same capacity, rate and batch; a priority user's
--                   position is its rank here + 1, a public user's ZCARD(priority) + its rank + 1.
--  15 invites  ZSET invite id (jti) -> the invite's expiry (ms): single-use invites already used;
--                   the tick trims members past their expiry (an expired invite is refused anyway).
--  16 laneseqs ZSET seq -> seq: the arrival seq of every entry created through a lane (invite.lua: priority
--                   or bypass), kept until the public line's head passes it (trimmed by the tick). A lane
--                   entry's seq falls anywhere among the public line's, so the status snapshot (snapshot.lua)
--                   lists these to answer them exactly instead of interpolating a public place.
--  17 journal  STREAM the room's journal (docs/operations.md#durability): one entry per script call that changes
--                   entries (its events: journal_entry, journal_flush) and per config change (journal_config
--                   below), read by `flashgate journal run` into PostgreSQL (journal/), which trims what it has
--                   written (XTRIM MINID). Bounded by XADD MAXLEN ~ journal_maxlen (config; absent: 1,000,000;
--                   0: the room writes no journal).
-- complete.lua alone takes more: KEYS[ROOM_KEYS + i] (after the room keys it takes) = fg:{room}:minted:<jti> of
--                   its i-th admission, a STRING
--                   the digest of the admission token the issuer minted for it, expiring with the token
--                   (lua/minted.lua; read only by complete.lua, never part of the room's state).
-- ARGV[1] = now in ms, or "" to use Redis TIME (one clock for every replica).
-- ARGV[2] = the policy to create a missing room with, for the scripts that may (enter: the replica's
--           last known config of the room, else the default policy; tick: the last known config
--           only; "" for the others), as
--           "state,capacity,rate,session_ms,batch,tick_ms,opens_ms,closes_ms,arrival_ms,prequeue,seed,auto,journal_maxlen",
--           or "" (seed: a fresh secret lottery seed, 32 hex digits, for a shuffle room; '-' for none; auto: '1'
--           for a room an enter creates under the default policy, else '0'; journal_maxlen: the journal
--           stream's bound, 0: no journal).
--           Fields are never empty: Lua's split below skips empty ones.
--
-- Epochs (invariant 6, docs/concepts.md#invariants): arrival and admission numbers restart at 1 when Redis loses a
-- room's data, so every id carries the room's epoch, a value created with the room and never
-- reused: waiting tokens carry it (issuer/waiting.go), admission ids (jti) begin with it, ended
-- records are keyed by it, and every script compares it with the room's before trusting an id.
-- An id of another epoch is "from before a data loss": never another buyer's entry or admission.
-- Scripts validate first and write after: Redis has no rollback.
local K_CONFIG, K_WAITING, K_ACTIVE, K_USERS, K_SEQ = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local K_ADMNO, K_ADMITS, K_BUCKET, K_STATS, K_ENDED = KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local K_UNCLAIMED = KEYS[13]
local K_PRIORITY, K_INVITES, K_LANESEQS = KEYS[14], KEYS[15], KEYS[16]
local K_JOURNAL = KEYS[17]

-- now_ms is the room's clock: the given or Redis time, but never earlier
-- than the latest time a script of this room has written (clock_ms). Replicas
-- read an injected clock before their scripts run, and a Redis host clock can
-- step back; either would otherwise let scripts run with time going backwards.
local function now_ms(cfg)
  local now
  if ARGV[1] ~= '' then
    now = tonumber(ARGV[1])
  else
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  if now < cfg.clock then return cfg.clock end
  return now
end

local function num(x) return string.format('%d', x) end

-- new_epoch returns a fresh epoch: Redis TIME in microseconds, base36 (10 characters until
-- 2059). A room recreated after a data loss is recreated later, so its epoch differs.
local B36 = '0123456789abcdefghijklmnopqrstuvwxyz'
local function new_epoch()
  local t = redis.call('TIME')
  local n = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local s = ''
  repeat
    local d = n % 36
    s = string.sub(B36, d + 1, d + 1) .. s
    n = (n - d) / 36
  until n == 0
  return s
end

-- The pre-queue lottery (docs/rooms.md#pre-queue-lottery). In a room with prequeue 'shuffle', everyone
-- who entered before the room first opened is placed in a uniformly random order, once:
--   * draw_lottery (from load_config, in the first script of any kind that finds the room open in
--     effect) records lottery_cutoff = the arrival counter at that moment (seq <= cutoff: entered
--     before opening; enter runs it before it assigns a seq, so no later arrival is ever drawn),
--     lottery_bits (bits of the cutoff) and lottery_ms. From then on the order is fixed by
--     (lottery_seed, epoch, cutoff): nothing that happens later can change it.
--   * the tick then rescores the pre-queue entries still at their seq (scores 1 … cutoff) with
--     lottery_score, at most its bound per call (no call walks the whole line), and records
--     lottery_done_ms when none is left. Until then nobody is admitted, and a pre-queue entry's
--     place is not shown (position 0 in the enter and status replies: in_prequeue).
-- lottery_score(seed, epoch, bits, seq) = -2^53 + h * 2^bits + seq, where h is the top 53 - bits bits
-- of the first 52 bits of SHA-1(seed .. ':' .. epoch .. ':' .. seq): negative, so every drawn entry is ahead of every
-- later arrival (scores >= 1); exact in a double (|score| <= 2^53); the seq is its low bits
-- (seq_of_score), and equal h (probability 2^-(53 - bits) a pair) fall back to arrival order.
-- The seed (128 bits from crypto/rand, written by issuer.SetRoom or with the create policy) stays
-- secret until the cutoff is recorded, and is shown after it (issuer.Stats), so anyone can
-- recompute the order (issuer.LotteryScore).
local TWO53 = 9007199254740992

local function lottery_score(seed, epoch, bits, seq)
  local h = tonumber(string.sub(redis.sha1hex(seed .. ':' .. epoch .. ':' .. num(seq)), 1, 13), 16) -- 52 bits
  h = math.floor(h / 2 ^ (bits - 1)) -- the top 53 - bits of them
  return -TWO53 + h * 2 ^ bits + seq
end

-- seq_of_score returns the arrival seq of an entry from its score in waiting (a seq, or a lottery
-- score). Every script that reads a waiting score as a seq goes through it.
local function seq_of_score(cfg, score)
  local x = tonumber(score)
  if x >= 0 then return x end
  return (x + TWO53) % (2 ^ cfg.bits)
end

-- in_prequeue: is the waiting entry seq in the pre-queue, its place not drawn yet? True in a shuffle
-- room before it opens (every entry), and for seq <= cutoff until the rescoring is done.
local function in_prequeue(cfg, seq)
  if cfg.cutoff then return not cfg.drawn_done and seq <= cfg.cutoff end
  return cfg.prequeue == 'shuffle'
end

local journal_config -- load_config calls it; defined below
local draw_lottery -- load_config calls it; defined below, after keep_clock (which it uses)

-- The journal (KEY 17; docs/operations.md#durability, journal/doc.go). The state changes of entries
-- a script call makes are one stream entry, written at the end of the call (journal_flush): the
-- fields kind 'batch', epoch, events, where events holds the call's events in order, one per line
-- ('\n' between them), each the comma-separated fields kind,seq,user,lane,at,admission,reason,eta
-- ('' when not known). Neither separator occurs in a field: user ids are issuer.ValidID's
-- [A-Za-z0-9-_.~@+=], the rest numbers, words and jtis ("<epoch>.<seq>.<admno>.<admitted_ms>").
-- An entry holds at most JOURNAL_BATCH_MAX events (a longer call writes several), so one read of
-- the consumer stays bounded. Every config change is one entry with kind 'config', epoch, at,
-- actor, action, detail; it flushes the call's events before it, so the stream keeps the order in
-- which the script made the changes. Appended with redis.pcall: over maxmemory, a script whose
-- journal entry is its first allocating write (an exchange without an arrival window) still
-- answers, and its events are not journaled; every other script writes it after its first,
-- freeing, write, which Redis then lets through (see keep_clock).
local JOURNAL_KINDS = { C = 'completed', R = 'revoked', E = 'expired', N = 'expired', L = 'left' }
local JOURNAL_BATCH_MAX = 256

-- journal_flush writes the events journal_entry has collected in cfg as one stream entry (none:
-- nothing). Every script that journals an entry event calls it before it returns.
local function journal_flush(cfg)
  local b = cfg.journal_buf
  if not b then return end
  cfg.journal_buf, cfg.journal_n = nil, 0
  cfg.journal_max = cfg.journal_max or num(cfg.journal)
  redis.pcall('XADD', K_JOURNAL, 'MAXLEN', '~', cfg.journal_max, '*', 'kind', 'batch', 'epoch', cfg.epoch,
    'events', table.concat(b, '\n'))
end

-- journal_at returns now (ms) formatted: the time of every event of a call, formatted once for it.
local function journal_at(cfg, now)
  if cfg.journal_at_ms ~= now then cfg.journal_at_ms, cfg.journal_at = now, num(now) end
  return cfg.journal_at
end

-- journal_line adds one entry event to the call's batch, its fields already joined (journal_entry's
-- line; cfg.journal > 0 is the caller's check). A script's hot loop builds its lines itself, with
-- the constant fields as one literal: per event one concatenation and this call.
local function journal_line(cfg, line)
  local b, n = cfg.journal_buf, 1
  if b then n = cfg.journal_n + 1 else b = {}; cfg.journal_buf = b end
  b[n] = line
  cfg.journal_n = n
  if n >= JOURNAL_BATCH_MAX then journal_flush(cfg) end
end

-- journal_entry adds one entry event to the call's batch: kind (entered, admitted, exchanged,
-- completed, revoked, expired, left, closed), the entry's arrival seq, and what is known of user,
-- lane, jti, reason; eta (entered only) is the estimated wait the enter reply shows (ms,
-- eta_shown), '' for none. seq may be given formatted already (a string). Formatting a number is
-- most of the Lua cost of an event, so the time, the same for every event of a call, is formatted
-- once (journal_at); per event one concatenation, per call one table.concat and one XADD
-- (journal_flush).
local function journal_entry(cfg, kind, seq, now, user, lane, jti, reason, eta)
  if cfg.journal <= 0 then return end
  if type(seq) ~= 'string' then seq = num(seq) end
  journal_line(cfg, kind .. ',' .. seq .. ',' .. (user or '') .. ',' .. (lane or '') .. ',' .. journal_at(cfg, now) ..
    ',' .. (jti or '') .. ',' .. (reason or '') .. ',' .. (eta or ''))
end

-- journal_config appends a config event: action (create, configure, draw, end, restore) and, as
-- detail, the whole config hash as a JSON object of strings, without lottery_seed while the lottery
-- is not drawn (the seed stays secret until then: docs/rooms.md#pre-queue-lottery).
journal_config = function(cfg, action)
  if cfg.journal <= 0 then return end
  journal_flush(cfg)
  local h = redis.call('HGETALL', K_CONFIG)
  local obj, drawn = {}, false
  for i = 1, #h, 2 do
    if h[i] ~= 'packed' then obj[h[i]] = h[i + 1] end -- (a copy of the others: load_config)
    if h[i] == 'lottery_cutoff' then drawn = true end
  end
  if not drawn then obj['lottery_seed'] = nil end
  -- The object's keys in sorted order: HGETALL's order is the hash's encoding's (with the packed
  -- copy, longer than a listpack value, the hash is a dict, whose order differs between servers).
  local names, parts = {}, {}
  for k in pairs(obj) do names[#names + 1] = k end
  table.sort(names)
  for i, k in ipairs(names) do parts[i] = cjson.encode(k) .. ':' .. cjson.encode(obj[k]) end
  redis.pcall('XADD', K_JOURNAL, 'MAXLEN', '~', cfg.journal, '*', 'kind', 'config', 'epoch', cfg.epoch,
    'at', string.format('%d', now_ms(cfg)), 'actor', '', 'action', action, 'detail',
    '{' .. table.concat(parts, ',') .. '}')
end

-- The config's packed copy: field 'packed' of the config hash, a JSON array of the fields
-- read_config_fields reads, by its index, as config_numbers makes them (numbers as JSON numbers,
-- false: absent), clock_ms and restoring left out (false), and a 24th element, 2: the format (a
-- copy of another format, an older version's strings, is not used). load_config reads it
-- with clock_ms and epoch (a copy of another epoch than the field's is not used), and freed in
-- the scripts that reuse a freed room, in one HMGET of three or four fields instead of the 23 (docs/operations.md#redis-data-model), and decodes it without
-- a tonumber per field. It is
-- a cache of the fields, which stay the truth (the admin API, the journal and restore read them):
-- every script that writes a packed field rewrites it (pack_config), one that finds it missing
-- (a room written by an older version, or a config write that dropped it: restore.lua) writes it
-- from the fields it read (pack_fields), and the tick rewrites it on every call, so a field
-- written around the scripts (a replica of an older version mid-upgrade) is seen within a tick.
-- A room without an epoch yet is not packed (the first script draws one, then packs). Written
-- with redis.pcall: over maxmemory it stays missing and load_config reads the fields.
--
-- read_config_fields returns the config's 23 fields (HMGET: false for an absent one), in the
-- packed copy's order. (A function, not a table of the names: a script builds every table its
-- body names on every call, a function only when it runs.)
local function read_config_fields()
  return redis.call('HMGET', K_CONFIG, 'state', 'capacity', 'rate', 'session_ms', 'batch', 'tick_ms', 'clock_ms',
    'opens_ms', 'closes_ms', 'epoch', 'arrival_ms', 'prequeue', 'lottery_cutoff', 'lottery_bits', 'lottery_done_ms',
    'closed_seq', 'close_reason', 'ended_ms', 'deleted_ms', 'auto', 'retention_ms', 'journal_maxlen', 'restoring')
end

-- CONFIG_KINDS tells read_config_fields' fields apart, by index: n a number, s a string.
local CONFIG_KINDS = 'snnnnnnnnsnsnnnnsnnsnns'

-- config_numbers turns the numeric fields of c (by read_config_fields' index, as HMGET answers
-- them) into numbers, in place (tonumber; false when absent or not a number), and returns c.
local function config_numbers(c)
  for i = 1, 23 do
    if c[i] and string.byte(CONFIG_KINDS, i) == 110 then c[i] = tonumber(c[i]) or false end
  end
  return c
end

-- pack_fields writes the packed copy of c (config_numbers' values, by read_config_fields' index),
-- or drops it: no room, no epoch, mid-restore, a number JSON cannot hold (inf, nan). Numbers are
-- written with 17 significant digits (exact for a double; cjson.encode keeps 14).
local function pack_fields(c)
  if not c[1] or not c[10] or c[23] then
    redis.call('HDEL', K_CONFIG, 'packed')
    return
  end
  local p = {}
  for i = 1, 22 do
    local v = c[i]
    if i == 7 or not v then
      p[i] = 'false'
    elseif type(v) == 'number' then
      if v ~= v or v == math.huge or v == -math.huge then
        redis.call('HDEL', K_CONFIG, 'packed')
        return
      end
      p[i] = string.format('%.17g', v)
    else
      p[i] = cjson.encode(v)
    end
  end
  p[23], p[24] = 'false', '2'
  redis.pcall('HSET', K_CONFIG, 'packed', '[' .. table.concat(p, ',') .. ']')
end

-- pack_config rewrites the packed copy from the fields as they are now (after a config write).
local function pack_config()
  pack_fields(config_numbers(read_config_fields()))
end

-- clear_freed deletes a freed room's keys for its name's reuse (load_config's reuse_freed):
-- every key but the journal, which is kept, without its expiry (the new room's events follow
-- the old room's end).
local function clear_freed()
  for i = 1, #KEYS do
    if KEYS[i] ~= K_JOURNAL then redis.call('DEL', KEYS[i]) end
  end
  redis.call('PERSIST', K_JOURNAL)
end

-- config_fields is load_config's path without a usable packed copy (freed: the room's 'freed'
-- field, read only by a script that reuses a freed room): the config from its fields
-- (config_numbers; a room mid-restore raises RESTORING, see load_config), the room created
-- from ARGV[2] when missing and allowed (or a freed room reused: reuse_freed), an epoch drawn
-- when missing, and the packed copy written. Returns the fields (read_config_fields' order)
-- and 1 if it created the room, else 0; nil, 0 for an unknown room.
local function config_fields(freed, allow_create, reuse_freed)
  local c = config_numbers(read_config_fields())
  if c[23] then error({ err = 'RESTORING the waiting room is being restored from the journal; retry' }) end
  if freed and reuse_freed then
    if not allow_create or ARGV[2] == '' then return nil, 0 end
    reuse_freed()
    c = {}
  end
  local created = 0
  if not c[1] then
    if not allow_create or ARGV[2] == '' then return nil, 0 end
    local p = {}
    for f in string.gmatch(ARGV[2], '[^,]+') do p[#p + 1] = f end
    local auto = (p[12] == '1') and '1' or '0'
    c = { p[1], p[2], p[3], p[4], p[5], p[6], false, p[7], p[8], new_epoch(), p[9] or '0', p[10] or 'fifo',
      false, false, false, false, false, false, false, auto, false, p[13] or '1000000', false }
    redis.call('HSET', K_CONFIG, 'state', c[1], 'capacity', c[2], 'rate', c[3],
      'session_ms', c[4], 'batch', c[5], 'tick_ms', c[6], 'opens_ms', c[8], 'closes_ms', c[9], 'epoch', c[10],
      'arrival_ms', c[11], 'prequeue', c[12], 'auto', auto, 'journal_maxlen', c[22])
    if c[12] == 'shuffle' and p[11] and p[11] ~= '-' then redis.call('HSET', K_CONFIG, 'lottery_seed', p[11]) end
    config_numbers(c)
    created = 1
  elseif not c[10] then
    c[10] = new_epoch()
    redis.call('HSET', K_CONFIG, 'epoch', c[10])
  end
  pack_fields(c)
  return c, created
end

-- load_config returns the room's config table and whether this call created
-- the room, or nil for an unknown room. With allow_create and a policy in
-- ARGV[2], a missing room is created from it (a new room, or one restored
-- after a data loss: either way with a new epoch). A config without an epoch
-- (a room written by the admin API, issuer.SetRoom) gets one here.
-- cfg.state is the state in effect: a room with an event window (opens_ms,
-- closes_ms; 0 = unbounded) is 'paused' before it opens (users line up,
-- nobody is admitted) and 'closed' from the moment it closes; the state as
-- configured is cfg.configured. Only windowed rooms read the clock here.
-- A shuffle room found open in effect for the first time has its pre-queue
-- lottery drawn here (draw_lottery), before the script does anything else.
-- With reuse_freed (enter, invite: clear_freed), a freed room (an auto room deleted idle
-- with nothing sold: tick.lua sets 'freed') is unknown: without a policy nil
-- (the issuer reserves an auto room's slot and calls again), with one its
-- keys are deleted (reuse_freed()) and it is created anew. (A function, not a flag: load_config
-- names no KEYS, so a script that never reuses a freed room takes only the keys it uses:
-- issuer/prelude.go assembleKeys.)
local function load_config(allow_create, reuse_freed)
  -- A room being restored (restore.lua: its line is written in several calls) is not read by any
  -- other script until the restore's last call: every one fails with a RESTORING error, which the
  -- issuer answers as room_lost (503, retry), so nobody reads a half-written line as NOT_FOUND.
  -- A packed copy means no restore: restore.lua drops it in the call that sets restoring, and
  -- pack_fields writes none while restoring is set; so restoring is read (config_fields) only
  -- without one, and freed only by a script that reuses a freed room (three fields, or four).
  local h
  if reuse_freed then
    h = redis.call('HMGET', K_CONFIG, 'packed', 'clock_ms', 'epoch', 'freed')
  else
    h = redis.call('HMGET', K_CONFIG, 'packed', 'clock_ms', 'epoch')
  end
  local c
  if h[1] and not h[4] then
    c = cjson.decode(h[1])
    if c[24] == 2 and c[10] == h[3] then c[7] = tonumber(h[2]) or false else c = nil end
  end
  local created = 0
  -- No packed copy (written by an older version, or dropped by a config write), one of another
  -- format or epoch than the field's (written around the scripts), or a freed room to reuse:
  -- the fields (config_fields, cold: not on a packed room's path).
  if not c then
    c, created = cold().config_fields(h[4], allow_create, reuse_freed)
    if not c then return nil, 0 end
  end
  -- (c holds numbers already: config_numbers, or the packed copy; x or nil: false reads as nil.)
  -- One field a line: a script's table holds only the fields its code names (issuer/prelude.go
  -- trimConfig drops the others' lines: a field costs every call to set).
  local cfg = {
    state = c[1],
    configured = c[1],
    capacity = c[2] or nil,
    rate = c[3] or nil,
    session = c[4] or nil,
    batch = c[5] or nil,
    tick = c[6] or nil,
    clock = c[7] or 0,
    opens = c[8] or 0,
    closes = c[9] or 0,
    epoch = c[10],
    arrival = c[11] or 0,
    prequeue = c[12] or 'fifo',
    cutoff = c[13] or nil,
    bits = c[14] or 0,
    drawn_done = c[15] or nil,
    closed_seq = c[16] or 0,
    close_reason = c[17] or '',
    ended = c[18] or 0,
    deleted = c[19] or 0,
    auto = c[20] == '1',
    retention = c[21] or 0,
    journal = c[22] or 1000000,
  }
  if created == 1 then cold().journal_config(cfg, 'create') end
  if (cfg.opens > 0 or cfg.closes > 0) and cfg.state ~= 'closed' then
    local now = now_ms(cfg)
    if cfg.closes > 0 and now >= cfg.closes then
      cfg.state = 'closed'
    elseif cfg.opens > 0 and now < cfg.opens then
      cfg.state = 'paused'
    end
  end
  if cfg.state == 'open' and cfg.prequeue == 'shuffle' and not cfg.cutoff then cold().draw_lottery(cfg) end
  return cfg, created
end

-- keep_clock records now as the room's latest time (scripts that write call it).
-- Scripts that free memory call it after their first freeing write (ZREM, HDEL):
-- over maxmemory, Redis refuses a script's first write if it is a deny-oom one
-- (HSET, ZADD, HINCRBY), so complete, leave, revoke and tick still work then.
local function keep_clock(cfg, now)
  if now > cfg.clock then
    redis.call('HSET', K_CONFIG, 'clock_ms', num(now))
    cfg.clock = now
  end
end

-- draw_lottery decides the pre-queue lottery of a shuffle room found open in effect with no cutoff
-- recorded yet (see above). Without a seed (a room written around issuer.SetRoom) nobody is drawn:
-- the cutoff is 0 and the line stays in arrival order. Writes the config hash once per room.
draw_lottery = function(cfg)
  local now = now_ms(cfg)
  local cutoff = 0
  if redis.call('HEXISTS', K_CONFIG, 'lottery_seed') == 1 then
    cutoff = tonumber(redis.call('GET', K_SEQ) or '0')
  end
  local bits = 1
  while 2 ^ bits <= cutoff do bits = bits + 1 end
  redis.call('HSET', K_CONFIG, 'lottery_cutoff', num(cutoff), 'lottery_bits', num(bits), 'lottery_ms', num(now))
  cfg.cutoff, cfg.bits = cutoff, bits
  if cutoff == 0 or redis.call('ZCOUNT', K_WAITING, 1, num(cutoff)) == 0 then
    redis.call('HSET', K_CONFIG, 'lottery_done_ms', num(now))
    cfg.drawn_done = now
  end
  pack_config()
  keep_clock(cfg, now)
  journal_config(cfg, 'draw')
end

-- seq_of returns the arrival seq of a jti "<epoch>.<seq>.<admno>.<admitted_ms>" of this room's
-- current epoch, or nil for any other string (an id minted before a data loss, or garbage); and
-- second, the seq's digits as the jti has them (num(seq) for a jti the room minted).
-- The epoch ([0-9a-z]+, no '.') is compared as the jti's prefix "<epoch>." and only the rest
-- matched (a plain find, then the digits): the whole id matched with a class cost ~8k instructions.
local function seq_of(cfg, jti)
  local p = cfg.jti_prefix
  if not p then p = cfg.epoch .. '.'; cfg.jti_prefix = p end
  if string.find(jti, p, 1, true) ~= 1 then return nil end
  local s = string.match(jti, '^(%d+)%.%d+%.%d+$', #p + 1)
  if not s then return nil end
  return tonumber(s), s
end

-- end_entry records the end of entry seq (kind C, R, E, N or L: the ended record's prefix) and
-- journals it, with what the caller knows of the user, the admission (jti) and the reason.
local function end_entry(cfg, kind, seq, now, user, jti, reason)
  redis.call('ZADD', K_ENDED, now, kind .. ':' .. cfg.epoch .. '.' .. num(seq))
  if kind == 'E' then reason = 'session_ended' elseif kind == 'N' then reason = 'not_claimed' end
  journal_entry(cfg, JOURNAL_KINDS[kind], seq, now, user, '', jti, reason)
end

-- ended returns the kind and time of entry seq's ended record (the first of C, R, E, L, N that
-- exists: one ZMSCORE), or nil, 0.
local function ended(cfg, seq)
  local id = ':' .. cfg.epoch .. '.' .. num(seq)
  local at = redis.call('ZMSCORE', K_ENDED, 'C' .. id, 'R' .. id, 'E' .. id, 'L' .. id, 'N' .. id)
  for i = 1, 5 do
    if at[i] then return string.sub('CRELN', i, i), tonumber(at[i]) end
  end
  return nil, 0
end

local function live_count(now)
  return redis.call('ZCOUNT', K_ACTIVE, '(' .. num(now), '+inf')
end

-- rate_budget returns how many admissions the rate allows right now, and the
-- bucket's current token count. Two limits, both shared by all replicas:
--   * the sliding log: admissions in (now-60s, now] never exceed the rate
--     (invariant 3, exact for every 60 s window);
--   * the token bucket: refills at rate/60000 per ms up to two ticks' worth,
--     so a minute's budget is spread over the minute instead of one burst.
local function rate_budget(cfg, now)
  redis.call('ZREMRANGEBYSCORE', K_ADMITS, '-inf', num(now - 60000))
  local window = cfg.rate - redis.call('ZCARD', K_ADMITS)
  local burst = math.max(1, math.ceil(cfg.rate * cfg.tick * 2 / 60000))
  local b = redis.call('HMGET', K_BUCKET, 'tokens', 'ts')
  local tokens = tonumber(b[1]) or burst
  local ts = tonumber(b[2]) or now
  if now > ts then tokens = math.min(burst, tokens + (now - ts) * cfg.rate / 60000) end
  return math.max(0, math.min(window, math.floor(tokens))), tokens
end

local function rate_consume(tokens, n, now)
  redis.call('HSET', K_BUCKET, 'tokens', tostring(tokens - n), 'ts', num(now))
end

-- admit moves one user into the active set, through lane (public, priority or bypass: the
-- journal's); the caller has checked capacity and rate.
-- The admission lasts the session (its score in active, and the token's exp). With an
-- arrival window shorter than the session it must also be claimed (an exchange, claim
-- below) before the window ends, else the tick ends it early as not claimed ('N'):
-- until then it is in the unclaimed set with its claim deadline.
local function admit(cfg, user, seq, now, lane)
  local admno = redis.call('INCR', K_ADMNO)
  local exp = now + cfg.session
  local jti = cfg.epoch .. '.' .. num(seq) .. '.' .. num(admno) .. '.' .. num(now)
  journal_entry(cfg, 'admitted', seq, now, user, lane, jti)
  redis.call('ZADD', K_ACTIVE, num(exp), jti)
  redis.call('HSET', K_USERS, user, jti)
  redis.call('ZADD', K_ADMITS, num(now), jti)
  if cfg.arrival > 0 and cfg.arrival < cfg.session then
    redis.call('ZADD', K_UNCLAIMED, num(now + cfg.arrival), jti)
  end
  return jti, exp
end

-- unclaimed_by returns the claim deadline of an admission not claimed yet, or nil
-- (claimed, admitted without a window, or ended).
local function unclaimed_by(jti)
  local d = redis.call('ZSCORE', K_UNCLAIMED, jti)
  if d then return tonumber(d) end
  return nil
end

-- live_admission: is the admission jti, whose expiry (score in active) is e, still live
-- at now: unexpired, and claimed or within its arrival window?
local function live_admission(jti, e, now)
  if tonumber(e) <= now then return false end
  local d = unclaimed_by(jti)
  return not d or d > now
end

-- drop_admission removes jti from the active set and, if it was never claimed, from the
-- unclaimed set; returns the ended-record kind an expiry of it is: 'N' (never claimed)
-- or 'E'. Every script that ends an admission calls it, so nothing lingers in unclaimed.
local function drop_admission(jti)
  redis.call('ZREM', K_ACTIVE, jti)
  if redis.call('ZREM', K_UNCLAIMED, jti) == 1 then return 'N' end
  return 'E'
end

-- drop_lapsed_index removes user's index entry j — one that names a lapsed admission (ending
-- it: its seq js, its expiry e), nothing (a zombie, invariant 5) or an admission of an earlier
-- epoch (invariant 6) — so the user may queue again (enter.lua, invite.lua).
local function drop_lapsed_index(cfg, user, j, js, e, now)
  redis.call('HDEL', K_USERS, user)
  if js and e then
    end_entry(cfg, drop_admission(j), js, now, user, j)
    redis.call('HINCRBY', K_STATS, 'expired', 1)
  elseif not (js and ended(cfg, js)) then
    redis.call('HINCRBY', K_STATS, 'zombies', 1)
  end
end

-- note_peak is called after every step that admitted someone (the tick, the enter fast
-- track): it keeps peak_active, and first_admit_ms (once) for eta_figures.
local function note_peak(now)
  local live = live_count(now)
  local peak = tonumber(redis.call('HGET', K_STATS, 'peak_active') or '0')
  if live > peak then redis.call('HSET', K_STATS, 'peak_active', live) end
  redis.call('HSETNX', K_STATS, 'first_admit_ms', num(now))
  return live
end

-- Estimates (docs/rooms.md#estimated-wait; the rule itself is Go's, issuer/eta.go, so the exact
-- and the snapshot paths compute it one way). eta_figures gathers the room's figures with
-- one O(log n) call and no write:
--   {now_ms, capacity, live, admits, ends, window_ms, session_ms, batch, tick_ms, opens_ms,
--    configured state}
-- opens_ms is the opening time while it is still ahead, else 0. admits, ends and window_ms,
-- the measured history, are 0 until eta_measure fills them (only an entry that waits for
-- capacity needs them: eta_expiry calls it). The caller appends eta_expiry's answer.
local function eta_figures(cfg, now)
  local opens = 0
  if cfg.opens > now then opens = cfg.opens end
  return { now, cfg.capacity, live_count(now), 0, 0, 0, cfg.session, cfg.batch, cfg.tick, opens, cfg.configured }
end

-- eta_lapsed returns how many admissions in active have lapsed at fig's now (not live, not yet
-- dropped): the rank of the earliest live expiry. Read once, and only by a caller that ranks.
local function eta_lapsed(fig)
  fig.lapsed = fig.lapsed or redis.call('ZCOUNT', K_ACTIVE, '-inf', num(fig[1]))
  return fig.lapsed
end

-- eta_measure fills fig's measured history (once): admits and ends count the admission log
-- (admits) and the ended records (ended) in the window (now - window_ms, now], window_ms =
-- min(60 s, now - first_admit_ms) (0: no admission yet, no history). Three O(log n) calls.
local function eta_measure(fig)
  if fig.measured then return end
  fig.measured = true
  local now = fig[1]
  local first = tonumber(redis.call('HGET', K_STATS, 'first_admit_ms') or '')
  if first and first < now then
    local window = math.min(60000, now - first)
    local from = '(' .. num(now - window)
    fig[4] = redis.call('ZCOUNT', K_ADMITS, from, num(now))
    fig[5] = redis.call('ZCOUNT', K_ENDED, from, num(now))
    fig[6] = window
  end
end

-- eta_expiry returns, for the entry at position pos, the expiry (ms) of the live admission
-- whose end frees the slot it waits for, or 0 when it waits for none: j = pos - capacity + live
-- slots must free first; the j-th earliest live expiry (by rank: O(log n)) when j <= live, else
-- (every later slot an admission made at most a whole number m of sessions later) the
-- (j - m * capacity)-th, or 0 when that is a slot free now. issuer/eta.go capBound reads it.
-- An entry that waits for capacity also needs the measured history (eta_measure).
-- ahead (optional): how many more positions right after pos the caller will ask about (enter's
-- newcomers, consecutive): the expiries of that many more ranks are read with this one, in one
-- ZRANGE, and kept in fig.ahead (rank -> expiry) for them; a caller that changes active after
-- the read drops fig.ahead.
local function eta_expiry(fig, pos, ahead)
  local capacity, live = fig[2], fig[3]
  local j = pos - capacity + live
  if j <= 0 then return 0 end
  eta_measure(fig)
  if j > live then
    j = j - math.ceil((j - live) / capacity) * capacity
    if j < 1 then return 0 end
  end
  local r = eta_lapsed(fig) + j - 1
  local c = fig.ahead
  if c and c[r] then return c[r] end
  local e = redis.call('ZRANGE', K_ACTIVE, r, r + (ahead or 0), 'WITHSCORES')
  if ahead and ahead > 0 then
    c = {}
    for i = 2, #e, 2 do c[r + i / 2 - 1] = tonumber(e[i]) end
    fig.ahead = c
  end
  return tonumber(e[2] or '0')
end

-- eta_pace works out once per fig what eta_shown's estimates share: fig.base, the wait until a
-- set opening (ms, 0: none), and fig.pace, admissions per ms, false when no estimate is shown (the
-- room neither open nor paused until a set opening, or no pace). Returns fig.pace. A caller may
-- skip eta_shown once fig.pace is false.
local function eta_pace(cfg, fig)
  local now, opens = fig[1], fig[10]
  fig.base, fig.pace = 0, false
  if cfg.state == 'paused' and fig[11] == 'open' and opens > now then
    fig.base = opens - now
  elseif cfg.state ~= 'open' then
    return false
  end
  local pace = cfg.rate / 60000
  if fig[8] > 0 and fig[9] > 0 then pace = math.min(pace, fig[8] / fig[9]) end
  if pace <= 0 then return false end
  fig.pace = pace
  return pace
end

-- eta_shown is the estimated wait (ms, a decimal string) the issuer shows for the entry at pos
-- (>= 1) given fig and its eta_expiry answer, or nil for none: issuer/eta.go's forPosition,
-- wait and estimate, operation for operation (the same doubles, so the same value; a test
-- compares them). Only for the journal's entered event (the estimate-error metric): no call.
local function eta_shown(cfg, fig, pos, expiry)
  local pace = fig.pace
  if pace == nil then pace = eta_pace(cfg, fig) end
  if not pace then return nil end
  local now, capacity, live, session = fig[1], fig[2], fig[3], fig[7]
  local ms = pos / pace
  local j = pos - capacity + live
  if j > 0 and fig[6] >= 5000 then -- minHistory
    local m, k, slot = 0, j, 0
    if k > live and capacity > 0 then
      m = math.floor((k - live + capacity - 1) / capacity)
      k = k - m * capacity
    end
    if k < 1 then slot = m * session else slot = math.max(0, expiry - now) + m * session end
    local fp = math.min(fig[4], fig[5]) / fig[6]
    if fp > 0 then slot = math.min(slot, j / fp) end
    ms = math.max(ms, slot)
  end
  return num(fig.base + math.floor(ms + 0.5))
end

-- Bans (KEYS 11 and 12; docs/rooms.md#bans). A ban costs one member in each key
-- per banned user, nothing per waiting user. Counters in stats: banned (bans
-- set), removed (waiting entries a ban removed from the line).
local K_BANS, K_BANWHY = KEYS[11], KEYS[12]

-- ban_user ends what user has in the room and bans them until ends (ms):
-- the waiting entry (in either lane) is removed (its token then reads REVOKED), the live
-- admission revoked as revoke.lua does, the user index dropped. A repeated
-- ban replaces the end and the reason, and is not counted again in stats
-- 'banned' while the first still lasts (a retry after a lost reply sets
-- the same ban twice). Frees first, then writes (see
-- keep_clock). Returns 1 if a waiting entry was removed, else 0, and the jti
-- of the admission it revoked, or ''.
local function ban_user(cfg, user, ends, reason, now)
  local removed, revoked = 0, ''
  local seq -- the removed waiting entry's arrival seq
  local prev = tonumber(redis.call('ZSCORE', K_BANS, user) or '0') -- the end of a ban in force, if any
  local s = redis.call('ZSCORE', K_WAITING, user)
  if s then
    redis.call('ZREM', K_WAITING, user)
    removed, seq = 1, seq_of_score(cfg, s)
  else
    local p = redis.call('ZSCORE', K_PRIORITY, user) -- a priority score is the seq itself
    if p then
      redis.call('ZREM', K_PRIORITY, user)
      removed, seq = 1, tonumber(p)
    end
  end
  local j = redis.call('HGET', K_USERS, user)
  if j then
    redis.call('HDEL', K_USERS, user)
    local js = seq_of(cfg, j)
    if js and redis.call('ZREM', K_ACTIVE, j) == 1 then
      revoked = j
      redis.call('ZREM', K_UNCLAIMED, j)
    end
  end
  keep_clock(cfg, now)
  if removed == 1 then
    end_entry(cfg, 'R', seq, now, user, '', 'banned')
    redis.call('HINCRBY', K_STATS, 'removed', 1)
  end
  if revoked ~= '' then
    end_entry(cfg, 'R', seq_of(cfg, revoked), now, user, revoked, 'banned')
    redis.call('HINCRBY', K_STATS, 'revoked', 1)
  end
  redis.call('ZADD', K_BANS, num(ends), user)
  redis.call('HSET', K_BANWHY, user, num(now) .. ':' .. reason)
  if prev <= now then redis.call('HINCRBY', K_STATS, 'banned', 1) end
  return removed, revoked
end

-- The end of a room (docs/rooms.md#the-end-of-a-sale). A room is closed in effect
-- (cfg.state == 'closed') when an operator closed it (close, sold-out, DELETE)
-- or its event window ended (closes_ms). From that moment every entry still
-- waiting reads CLOSED (status answers it from the room's state: no write per
-- entry), nobody more is admitted, and the line is drained in bounded steps
-- (drain.lua). The end is recorded once by the first writing script that sees
-- it (note_end): closed_seq, close_reason, ended_ms, and every room key set to
-- expire a retention after ended_ms.

-- end_reason is why the room is closed in effect now: the recorded reason, or
-- (the end not recorded yet) 'closed' for a room closed by its state,
-- 'event_ended' for one whose event window ended.
local function end_reason(cfg)
  if cfg.ended > 0 and cfg.close_reason ~= '' then return cfg.close_reason end
  if cfg.configured == 'closed' then return 'closed' end
  return 'event_ended'
end

-- closed_line: does the entry with arrival seq belong to a line that closing
-- ended? Every entry while the room is closed in effect; after a reopening,
-- the entries of the closed line (seq <= closed_seq). Returns the reason, or nil.
local function closed_line(cfg, seq)
  if cfg.state == 'closed' then return end_reason(cfg) end
  if seq <= cfg.closed_seq then return cfg.close_reason ~= '' and cfg.close_reason or 'closed' end
  return nil
end

-- retention_ms is how long the room's keys live after its end: the room's
-- retention_ms, else the issuer's default (ARGV given by the caller).
local function retention_ms(cfg, default)
  if cfg.retention > 0 then return cfg.retention end
  return tonumber(default) or 86400000
end

-- apply_retention sets every key of the room to expire retention after its
-- end (PEXPIRE relative to the room's clock, so an injected clock and Redis's
-- agree on the remaining time). Keys a later write creates get it at the next
-- call (the tick re-applies it while the room has keys).
local function apply_retention(cfg, now, default)
  local ttl = math.max(1, cfg.ended + retention_ms(cfg, default) - now)
  for i = 1, #KEYS do redis.call('PEXPIRE', KEYS[i], num(ttl)) end
end

-- note_end records the end of a room closed in effect whose end is not
-- recorded yet: closed_seq = the arrival counter (enters are refused while
-- closed, so it no longer moves), the reason, ended_ms (the window's close
-- for a room whose event window ended, else now), and the keys' expiry.
local function note_end(cfg, now, reason, default)
  local seq = tonumber(redis.call('GET', K_SEQ) or '0')
  local at = now
  if cfg.configured ~= 'closed' and cfg.closes > 0 and cfg.closes < now then at = cfg.closes end
  reason = reason or end_reason(cfg)
  redis.call('HSET', K_CONFIG, 'closed_seq', num(seq), 'close_reason', reason, 'ended_ms', num(at))
  cfg.closed_seq, cfg.close_reason, cfg.ended = seq, reason, at
  pack_config()
  apply_retention(cfg, now, default)
  journal_config(cfg, 'end')
end
