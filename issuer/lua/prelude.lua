-- prelude.lua and the prelude_*.lua files after it (issuer/store/scripts.go preludeFiles: one file per
-- concern) are prepended to every flashgate room script: each script gets the definitions it names
-- (issuer/store/prelude.go assemble). Every definition a script carries costs it a
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

