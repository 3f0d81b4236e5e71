-- lottery (run without the prelude; issuer/lottery_reveal.go): the two writes the issuer makes to a
-- shuffle room's config hash after its cutoff when the lottery's secret is derived from a key the
-- issuer holds (lottery_seed 'pending': the secret is never in Redis before the draw;
-- docs/rooms.md#pre-queue-lottery). KEYS[1] = the room's config hash; ARGV[1] = the room's epoch
-- (nothing is written when it is another now); ARGV[2] = the step:
--   'fix'    ARGV[3] entrant digest, ARGV[4] entrant count, ARGV[5] beacon round ('0': none),
--            ARGV[6] now (ms): written once, only once the cutoff is recorded (lottery_cutoff);
--   'reveal' ARGV[3] the committed secret, ARGV[4] the draw's seed, ARGV[5] the beacon round's
--            signature ('' without a beacon): only while lottery_seed is 'pending' and the entrants
--            are fixed. The tick places the pre-queue from lottery_seed from then on.
-- Returns 1 when it wrote, 0 when it did not.
local c = redis.call('HMGET', KEYS[1], 'epoch', 'lottery_cutoff', 'lottery_seed', 'lottery_entrants')
if c[1] ~= ARGV[1] or not c[2] or c[3] ~= 'pending' then return 0 end
if ARGV[2] == 'fix' then
  if c[4] then return 0 end
  redis.call('HSET', KEYS[1], 'lottery_entrants', ARGV[3], 'lottery_entrants_n', ARGV[4],
    'lottery_round', ARGV[5], 'lottery_fixed_ms', ARGV[6])
  return 1
end
if ARGV[2] == 'reveal' and c[4] then
  redis.call('HSET', KEYS[1], 'lottery_secret', ARGV[3], 'lottery_seed', ARGV[4], 'lottery_beacon', ARGV[5])
  return 1
end
return 0
