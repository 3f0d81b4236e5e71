// Package faults holds flashgate's Redis fault-injection tests; it has no
// non-test code. Each test injects one kind of failure into a real
// redis-server (started per test on a loopback port by internal/redistest)
// and checks that the defence meant for it holds:
//
//   - TestScriptFlushDuringSimulation: SCRIPT FLUSH every 50 ms while a whole
//     flash sale runs over HTTP. Defence: EVALSHA falls back to EVAL on
//     NOSCRIPT (go-redis redis.Script.Run), so a flushed script cache costs
//     one round trip and loses nothing: no errors, FIFO, capacity.
//   - TestScriptsRepeatedAfterLostReply: every script run twice with the same
//     arguments (what a go-redis retry after a lost reply does) leaves the
//     same Redis state as running it once, and answers the same (enter,
//     status, stats, tick) or the documented repeat answer (leave →
//     NOT_FOUND, complete and revoke → Repeated with the first time).
//     Defence: the scripts are idempotent and keep their limits in Redis.
//     TestRepeatedTicksRespectLimits ticks over and over (each tick sent
//     twice) at a frozen clock: capacity and rate still stop admissions.
//     TestAutoCreatedRoomSurvivesRetriedEnter: a room auto-created by a
//     retried first enter is still registered with the tick loops.
//   - TestRedisKilledAndRestarted: redis-server SIGKILLed under HTTP
//     traffic, then restarted empty. Defence: every Redis failure becomes
//     503 unavailable with Retry-After (never 500), /readyz follows Redis,
//     /healthz does not, and the issuer (tick loop included) recovers alone.
//   - TestRedisDownFailsFastAndQuietly: redis-server SIGKILLed under HTTP
//     traffic with the Redis client behind the breaker, as flashgate serve
//     runs it. Defence: internal/redisconn's Breaker. Once it is open, enter
//     and status answer 503 within 250 ms each (measured one by one); the
//     log says "redis down" and "redis up" once, not a line per request; it
//     closes by itself when Redis is back.
//   - TestRedisUnreachable: the verifier keeps verifying offline while
//     completion fails closed with a retryable error (redischeck,
//     /v1/complete, the order service); TestRedisHangs does the same for a
//     Redis that accepts connections and never answers.
//   - TestReplicasUnderFaults: three issuer replicas tick one room while 500
//     users enter and complete, with SCRIPT FLUSH and CLIENT KILL TYPE normal
//     injected mid-run. Defence: atomic scripts with all limits in Redis, and
//     idempotent retries: FIFO, capacity, one admission and at most one
//     completion per user.
//
// Every test bounds its own run time, polls with deadlines instead of
// asserting on timing, and uses loopback only.
package faults
