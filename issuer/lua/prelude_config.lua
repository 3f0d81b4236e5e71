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
-- issuer/store/prelude.go assembleKeys.)
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
  -- One field a line: a script's table holds only the fields its code names (issuer/store/prelude.go
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

