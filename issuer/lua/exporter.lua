-- exporter: the room's metrics-exporter lease (not a room script: no prelude).
-- KEYS[1] = fg:{room}:exporter; ARGV[1] = replica id; ARGV[2] = lease in ms.
-- The holder (or anyone, while nobody holds it) takes or renews the lease: 1;
-- another replica's live lease: 0.
local cur = redis.call('GET', KEYS[1])
if cur == false or cur == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
