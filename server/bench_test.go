package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
)

// The HTTP benchmarks run over real loopback TCP with keep-alive clients
// (b.RunParallel, 32 goroutines per GOMAXPROCS: 64 concurrent connections on
// two cores — a surge is thousands of clients, and the issuer coalesces the
// enters that arrive together), so one `go test -bench .`
// run shows enter and status next to their physical limit: a bare fiber
// handler answering a small JSON on the same stack.

const benchParallelism = 32

func benchClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024,
		IdleConnTimeout: time.Minute}}
}

func drive(b *testing.B, cl *http.Client, build func(i int64) *http.Request) {
	var n atomic.Int64
	b.SetParallelism(benchParallelism)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := cl.Do(build(n.Add(1)))
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			_ = res.Body.Close()
			if res.StatusCode != 200 {
				b.Errorf("status %d", res.StatusCode)
				return
			}
		}
	})
}

// BenchmarkEnterHTTP: every op is a new user joining a line. batch=1 runs
// one enter script per op; batch=32 (the default) coalesces the enters that
// arrive while a call is in flight into one call (issuer/batch.go).
func BenchmarkEnterHTTP(b *testing.B) {
	for _, n := range []int{1, issuer.DefaultEnterBatch} {
		b.Run("batch="+strconv.Itoa(n), func(b *testing.B) { benchEnter(b, n) })
	}
}

func benchEnter(b *testing.B, batch int) {
	e := newEnv(b, withIssuer(func(c *issuer.Config) { c.EnterBatch = batch }))
	base := e.listen()
	room := e.room(issuer.RoomConfig{Capacity: 1, RatePerMinute: 1})
	url := base + "/v1/rooms/" + room + "/enter"
	drive(b, benchClient(), func(i int64) *http.Request {
		r, _ := http.NewRequest("POST", url, nil)
		r.Header.Set("X-User-ID", "u"+strconv.FormatInt(i, 10))
		return r
	})
	b.StopTimer()
	if st := e.is.Observe().Batches.Enter; st.Calls > 0 {
		b.ReportMetric(float64(st.Items)/float64(st.Calls), "users/call")
	}
}

// BenchmarkStatusHTTP: waiting users polling their position, every status
// exact (the default: one status script call per poll, with the estimate's
// figures; the room is capacity-bound, its most expensive case).
func BenchmarkStatusHTTP(b *testing.B) { benchStatusHTTP(b, 0) }

// BenchmarkStatusHTTPSnapshot: the same with the status snapshot on (the
// opt-in for very large lines, 500 ms): users far behind the head are
// answered from the replica's snapshot, without a Redis call.
func BenchmarkStatusHTTPSnapshot(b *testing.B) { benchStatusHTTP(b, issuer.SuggestedStatusSnapshot) }

// BenchmarkStatusHTTPAccessLog: the snapshot's fast path with the access
// log on (JSON, written to io.Discard): what one log line costs a request.
func BenchmarkStatusHTTPAccessLog(b *testing.B) {
	benchStatusHTTP(b, issuer.SuggestedStatusSnapshot, withOptions(func(o *Options) {
		o.AccessLog, o.Logger = true, slog.New(slog.NewJSONHandler(io.Discard, nil))
	}))
}

func benchStatusHTTP(b *testing.B, snapshot time.Duration, opts ...envOption) {
	e := newEnv(b, append([]envOption{withIssuer(func(c *issuer.Config) { c.StatusSnapshot = snapshot })}, opts...)...)
	base := e.listen()
	room := e.room(issuer.RoomConfig{Capacity: 1, RatePerMinute: 1})
	const users = 1000
	toks := waitingUsers(b, e, room, users)
	url := base + "/v1/rooms/" + room + "/status"
	drive(b, benchClient(), func(i int64) *http.Request {
		k := int(i % users)
		r, _ := http.NewRequest("GET", url, nil)
		r.Header.Set("X-User-ID", "u"+strconv.Itoa(k))
		r.Header.Set("Authorization", "Bearer "+toks[k])
		return r
	})
}

// waitingUsers enters the users u0 … u<n-1> into room and returns their
// waiting tokens.
func waitingUsers(b *testing.B, e *env, room string, n int) []string {
	toks := make([]string, n)
	for i := range toks {
		en, err := e.is.Enter(context.Background(), room, "u"+strconv.Itoa(i))
		if err != nil {
			b.Fatal(err)
		}
		toks[i] = en.WaitingToken
	}
	return toks
}

// bareFiber serves GET /x with h on a loopback fiber app and drives it.
func bareFiber(b *testing.B, h fiber.Handler) {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/x", h)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = app.Listener(ln) }()
	b.Cleanup(func() { _ = app.Shutdown() })
	url := "http://" + ln.Addr().String() + "/x"
	drive(b, benchClient(), func(int64) *http.Request {
		r, _ := http.NewRequest("GET", url, nil)
		return r
	})
}

// BenchmarkFiberRedisPing is the floor of any request that needs one Redis
// round trip: the bare handler plus one PING on the same kind of Redis.
func BenchmarkFiberRedisPing(b *testing.B) {
	rdb := redistest.Client(b)
	bareFiber(b, func(c *fiber.Ctx) error {
		if err := rdb.Ping(c.UserContext()).Err(); err != nil {
			return err
		}
		return c.JSON(fiber.Map{"room": "r", "state": "WAITING", "position": 42})
	})
}

// BenchmarkBareFiber is the ceiling: fiber answering a small JSON, no Redis.
func BenchmarkBareFiber(b *testing.B) {
	bareFiber(b, func(c *fiber.Ctx) error {
		return c.JSON(fiber.Map{"room": "r", "state": "WAITING", "position": 42})
	})
}
