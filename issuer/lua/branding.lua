-- branding: sets the config hash's (KEYS[1]) fields given as name, value pairs (ARGV) that are not set
-- yet: a restored room's page branding, which the scripts' policy does not carry (issuer recovery).
for i = 1, #ARGV, 2 do redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1]) end
