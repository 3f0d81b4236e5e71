// Package streams holds flashgate's open-streams benchmark (issue 34 §4); it
// has no non-test code. BenchmarkStreams builds `flashgate`, starts a
// private redis-server and two `flashgate serve` replicas on loopback (one
// Redis, one secret), enters FLASHGATE_STREAMS users (default 20,000) into
// one paused room, and holds every user's event stream open from client
// processes (the test binary re-executed: one process can hold only
// RLIMIT_NOFILE descriptors, and a stream costs one on each side), each
// bound to many loopback source addresses (127.x.y.z). It reports each
// replica's memory and goroutines per open stream, the Redis commands per
// room tick with the streams open and with none, and the time from an
// admin state change (pause → open, then open → pause, through replica A's
// admin API) to each stream's event showing the new room state — p50, p99
// and max, per replica and over all streams. Its limit row holds the same
// clients' connections in a bare Go server (one goroutine per connection,
// one event line written to all of them on a signal). `make bench-streams`
// runs it; docs/performance.md#method describes it.
package streams
