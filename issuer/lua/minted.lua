-- minted (run without the prelude: its keys are not a room's): notes the admission tokens a
-- replica minted, so that /v1/complete can tell one of them byte for byte instead of checking
-- its Ed25519 signature (lua/complete.lua, docs/security.md#security-model).
-- KEYS[i] = fg:{room}:minted:<jti> of the i-th token; ARGV[2i - 1] = its digest
-- (issuer.MintedDigest), ARGV[2i] = its time to live in ms (> 0): until the token's exp by the
-- issuer's clock (SET PX), so nothing else ever deletes it. Minting the same admission again
-- (same jti, exp and key: the same token) writes the same value. Returns the number of keys
-- written.
for i, k in ipairs(KEYS) do redis.call('SET', k, ARGV[2 * i - 1], 'PX', ARGV[2 * i]) end
return #KEYS
