package server

import (
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/issuer"
)

// The handler benchmarks measure the server's own CPU per request, without
// the HTTP connection's: the fiber app's handler is called on a
// fasthttp.RequestCtx built in memory (no socket, no client), by 64
// goroutines at once so that the issuer coalesces as it does under wrk -c64
// (make bench-http). cpu-µs/op is the process's CPU time (user + system,
// getrusage) over the timed loop per request: the handler chain, the
// issuer's Go side and the go-redis client, Redis's own CPU excluded (its
// own process). It is what flashgate adds to a request beyond a bare fiber
// handler's parsing and writing, the part of the from-outside rows
// (tools/benchwrk) the server can cut. The access log is on (text, to
// io.Discard), as flashgate serve runs it.

// BenchmarkHandlerEnter: every op is a new user entering a paused room.
func BenchmarkHandlerEnter(b *testing.B) {
	e := newEnv(b, withOptions(accessLogDiscard))
	room := e.room(issuer.RoomConfig{Capacity: 1, RatePerMinute: 1})
	var n atomic.Int64
	driveHandler(b, e, func(req *fasthttp.Request) {
		req.Header.SetMethod("POST")
		req.SetRequestURI("/v1/rooms/" + room + "/enter")
		req.Header.Set("X-User-ID", "u"+strconv.FormatInt(n.Add(1), 10))
	})
}

// BenchmarkHandlerStatus: waiting users polling their exact status (the
// default, no snapshot), cycling through 1,000 users of a paused room.
func BenchmarkHandlerStatus(b *testing.B) {
	e := newEnv(b, withOptions(accessLogDiscard))
	room := e.room(issuer.RoomConfig{Capacity: 1, RatePerMinute: 1})
	const users = 1000
	toks := waitingUsers(b, e, room, users)
	var n atomic.Int64
	driveHandler(b, e, func(req *fasthttp.Request) {
		k := int(n.Add(1) % users)
		req.Header.SetMethod("GET")
		req.SetRequestURI("/v1/rooms/" + room + "/status")
		req.Header.Set("X-User-ID", "u"+strconv.Itoa(k))
		req.Header.Set("Authorization", "Bearer "+toks[k])
	})
}

func accessLogDiscard(o *Options) {
	o.AccessLog, o.Logger = true, slog.New(slog.NewTextHandler(io.Discard, nil))
}

// driveHandler calls e's fiber handler b.N times from 64 goroutines on
// in-memory request contexts (build fills each request) and reports
// cpu-µs/op; any answer but 200 fails the benchmark.
func driveHandler(b *testing.B, e *env, build func(*fasthttp.Request)) {
	h := e.srv.App().Handler()
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	b.SetParallelism(benchParallelism)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	b.RunParallel(func(pb *testing.PB) {
		var ctx fasthttp.RequestCtx
		var req fasthttp.Request
		for pb.Next() {
			req.Reset()
			build(&req)
			ctx.Init(&req, addr, nil)
			ctx.ResetUserValues() // as fasthttp's server does between requests
			h(&ctx)
			if s := ctx.Response.StatusCode(); s != 200 {
				b.Errorf("status %d: %s", s, ctx.Response.Body())
				return
			}
		}
	})
	cpu := processCPU(b) - cpu0
	b.StopTimer()
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
}

// processCPU is the process's CPU time so far (user + system).
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
