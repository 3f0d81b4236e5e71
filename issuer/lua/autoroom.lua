-- autoroom (not prefixed with the prelude: its one key is global, another
-- Cluster slot than any room's): KEYS[1] = fg:autorooms, ZSET room -> when its
-- slot was reserved (ms). ARGV[1] = room, ARGV[2] = now (ms), ARGV[3] = the
-- most auto rooms (Config.MaxAutoRooms).
-- Reserves a slot for an auto room before an enter may create it: a room that
-- holds one keeps it (1); a new one gets one while fewer than ARGV[3] are
-- held (1), else 0. Atomic, so the limit holds across replicas. A slot is
-- freed (ZREM) when its room is deleted (idle, or DELETE) or found gone.
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 1 end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return 1
