// Package faults holds flashgate's Redis fault-injection tests; it has no
// non-test code. Each test injects one kind of failure into a real
// redis-server (started per test on a loopback port by internal/testing/redistest)
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
//     TestPolicyScriptsRepeatedAfterLostReply does the same for the queue
//     policies' scripts (the lottery's draw and placing, invite enters, a
//     ban, the arrival window's claim and expiry, sold-out, drain, delete);
//     it found a repeated ban counted twice in stats and a tick whose
//     retried drain reported the line still waiting.
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
//     completion fails closed with a retryable error (order.Redis,
//     /v1/complete, the order service); TestRedisHangs does the same for a
//     Redis that accepts connections and never answers.
//   - TestReplicasUnderFaults: three issuer replicas tick one room while 500
//     users enter and complete, with SCRIPT FLUSH and CLIENT KILL TYPE normal
//     injected mid-run. Defence: atomic scripts with all limits in Redis, and
//     idempotent retries: FIFO, capacity, one admission and at most one
//     completion per user.
//   - TestStorm: the client-side storm (the load that once broke invariant 7). Two `flashgate serve`
//     processes (the binary is built by the test) over one redis-server,
//     two rooms (capacity 25, 600/min, 6 s sessions), 250 buyers entering,
//     polling, exchanging and completing or abandoning through both
//     replicas, retrying 503s after Retry-After. One scenario per fault:
//     none; Redis SIGKILL and restart with appendonly yes; the same without
//     persistence (data lost); a replica SIGKILLed and restarted; Redis
//     SIGSTOPped for 5 s; SCRIPT FLUSH every 100 ms; maxmemory halved for
//     3 s. The invariants are checked only from what the buyers saw
//     (storm_check_test.go): FIFO and live ≤ capacity within a room's epoch
//     (the first part of a four-part admission id), admissions per 60 s ≤
//     rate, at most one non-repeated completion per admission and no 200
//     for a purchase the buyer never completed, no 5xx but 503, Retry-After
//     on every 503, every answer within 3 s, no owner mismatch for one's own
//     token, no entry vanishing but with the data — and after a data loss
//     nothing minted before it completes or reads WAITING. Each scenario
//     prints a summary; FLASHGATE_STORM_DURATION (default 12s) and
//     FLASHGATE_STORM_BUYERS (default 250) make the runs longer or larger.
//     TestStormChecks runs the checks on made-up histories, so that a check
//     that cannot fail is caught without a storm.
//
// Every test bounds its own run time, polls with deadlines instead of
// asserting on timing, and uses loopback only.
package faults
