package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/internal/testing/testkit"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/keys"
	"github.com/flashgate/flashgate/problem"
	"github.com/flashgate/flashgate/server"
)

// silent drops go-redis's internal log lines: these tests kill servers and
// connections on purpose, and the dial retries would flood the output.
type silent struct{}

func (silent) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(silent{})
	os.Exit(m.Run())
}

var quiet = slog.New(slog.DiscardHandler)

// secret is the waiting-token key of every issuer in these tests.
var secret = []byte("faults-faults-faults-faults-0123")

// newClock is a fake clock (testkit.Clock) that moves only when told,
// shared by several issuer replicas.
func newClock() *testkit.Clock { return testkit.NewClock(testkit.Epoch.Local()) } // Local, as time.UnixMilli reads

// newRing returns a fresh signing key ring.
func newRing(t testing.TB) *keys.Ring {
	t.Helper()
	ring, err := keys.Generate(time.Now())
	require.NoError(t, err)
	return ring
}

// serve runs an issuer HTTP server on a loopback port until the test ends
// and returns its base URL; mod, if any, adjusts its Options.
func serve(t testing.TB, is *issuer.Issuer, ring *keys.Ring, admin string, mod ...func(*server.Options)) string {
	t.Helper()
	opts := server.Options{Issuer: is, Keys: ring, AdminToken: admin, Logger: quiet}
	for _, m := range mod {
		m(&opts)
	}
	srv, err := server.New(opts)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Listen(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	})
	return "http://" + ln.Addr().String()
}

// runTicks runs is.Run until the test ends.
func runTicks(t testing.TB, is *issuer.Issuer) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = is.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// answer is one HTTP answer, with the problem members when there are any.
type answer struct {
	status      int
	contentType string
	retryAfter  string
	body        []byte
	// problem members (RFC 9457)
	Type  string `json:"type"`
	Code  string `json:"code"`
	State string `json:"state"`
	// Entry members
	WaitingToken string `json:"waiting_token"`
	Err          error  `json:"-"`
}

func (a answer) String() string {
	if a.Err != nil {
		return "transport error: " + a.Err.Error()
	}
	return fmt.Sprintf("%d %s (Retry-After %q): %s", a.status, a.contentType, a.retryAfter, clip(a.body))
}

func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// do sends one request and decodes the answer.
func do(hc *http.Client, method, url, user, bearer string) answer {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return answer{Err: err}
	}
	if user != "" {
		req.Header.Set("X-User-ID", user)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	res, err := hc.Do(req)
	if err != nil {
		return answer{Err: err}
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	a := answer{status: res.StatusCode, contentType: res.Header.Get("Content-Type"),
		retryAfter: res.Header.Get("Retry-After"), body: body, Err: err}
	_ = json.Unmarshal(body, &a)
	return a
}

// isUnavailable reports whether a is the issuer's "queue store unavailable"
// answer: 503, application/problem+json, Retry-After, type …/unavailable.
func isUnavailable(a answer) bool {
	return a.Err == nil && a.status == http.StatusServiceUnavailable &&
		a.contentType == "application/problem+json" && a.retryAfter != "" &&
		a.Type == problem.Base+"unavailable" && a.Code == string(flashgate.CodeUnavailable)
}

// eventually polls f every 20 ms until it returns true or d passes.
func eventually(t testing.TB, d time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// snapshot is the whole content of a Redis database (redistest.Dump),
// streams as their distinct events: delivered at least once.
func snapshot(t testing.TB, rdb *redis.Client) map[string]any {
	return redistest.Dump(t, rdb, true)
}

// info returns one field of INFO section (e.g. "commandstats",
// "cmdstat_eval", "calls"), 0 when absent.
func info(t testing.TB, rdb *redis.Client, section, line, field string) int64 {
	t.Helper()
	s, err := rdb.Info(context.Background(), section).Result()
	require.NoError(t, err)
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		rest, ok := strings.CutPrefix(l, line+":")
		if !ok {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, field+"="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
	}
	return 0
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// roomKey is the Redis key of one of room's structures (name: config,
// waiting, active, users, seq, admno, admits, bucket, stats or ended; the
// layout is lua/prelude.lua's KEYS), for tests that look into Redis.
func roomKey(room, name string) string { return "fg:{" + room + "}:" + name }
