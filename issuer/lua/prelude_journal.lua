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

