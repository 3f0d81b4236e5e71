package upgrade

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/roomkey"
	"github.com/flashgate/flashgate/internal/simulate"
	"github.com/flashgate/flashgate/internal/testing/pgtest"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/journal"
	"github.com/flashgate/flashgate/journal/consumer"
)

// PreviousRelease is the commit the rolling upgrade starts from: the
// previous release. No release is tagged yet, so it is the base of the
// change that added this test (main at 4dbe417); move it to each release's
// tag when one is cut. FLASHGATE_UPGRADE_FROM overrides it (any commit-ish).
const PreviousRelease = "4dbe417"

func TestMain(m *testing.M) { pgtest.Main(m) }

// repoRoot is the repository's top directory (this package is test/upgrade).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	return root
}

// buildPrevious builds `flashgate` at commit from the repository's git
// history (git archive, so the working tree is untouched), cached by commit
// under the user cache directory: later runs reuse it.
func buildPrevious(t *testing.T, commit string) string {
	t.Helper()
	root := repoRoot(t)
	out, err := exec.Command("git", "-C", root, "rev-parse", "--verify", "--quiet", commit+"^{commit}").Output()
	if err != nil {
		t.Fatalf("the previous release %s is not in this clone's git history (%v): the rolling-upgrade test builds it from git; "+
			"clone with full history (git fetch --unshallow, or actions/checkout fetch-depth: 0), or set FLASHGATE_UPGRADE_FROM "+
			"to a commit the clone has", commit, err)
	}
	sha := strings.TrimSpace(string(out))
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	bin := filepath.Join(cache, "flashgate", "upgrade", sha, "flashgate")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	src := t.TempDir()
	archive := exec.Command("git", "-C", root, "archive", "--format=tar", sha)
	untar := exec.Command("tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	require.NoError(t, err)
	untar.Stdin = pipe
	require.NoError(t, untar.Start())
	require.NoError(t, archive.Run())
	require.NoError(t, untar.Wait())
	tmp := fmt.Sprintf("%s.tmp-%d", bin, os.Getpid()) // a concurrent run builds its own
	require.NoError(t, os.MkdirAll(filepath.Dir(bin), 0o755))
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-X main.version=upgrade-from-"+sha[:12], "-o", tmp, "./cmd/flashgate")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", sha, err, b)
	}
	require.NoError(t, os.Rename(tmp, bin))
	return bin
}

func buildCurrent(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "flashgate")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-X main.version=upgrade-to", "-o", bin, "./cmd/flashgate")
	build.Dir = repoRoot(t)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building this tree: %v\n%s", err, b)
	}
	return bin
}

// proc is one flashgate process of the test.
type proc struct {
	name string
	cmd  *exec.Cmd
	addr string // its HTTP address (serve: the API; journal run: /metrics)
	log  *lockedBuffer
	done chan error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// start runs bin with args and env, and waits until GET addr+ready answers 200.
func start(t *testing.T, name, bin string, args []string, env []string, addr, ready string) *proc {
	t.Helper()
	p := &proc{name: name, addr: addr, log: &lockedBuffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	require.NoError(t, p.cmd.Start())
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
		}
		if t.Failed() {
			t.Logf("--- %s log:\n%s", p.name, tail(p.log.String(), 40))
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := http.Get("http://" + addr + ready)
		if err == nil {
			_ = res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case err := <-p.done:
			t.Fatalf("%s exited: %v\n%s", name, err, p.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready on %s%s after 30 s:\n%s", name, addr, ready, p.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends SIGTERM (a rolling update's) and waits for a clean exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-p.done:
		require.NoError(t, err, "%s did not exit cleanly:\n%s", p.name, tail(p.log.String(), 40))
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not stop within 30 s", p.name)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// roundRobin is the load balancer: each request goes to the next backend,
// so a buyer's calls alternate between versions (enter on one, status on
// the other, exchange on either). A backend set down is skipped; a backend
// that refuses the connection (stopping) is retried on the next.
type roundRobin struct {
	mu       sync.Mutex
	backends []*url.URL
	next     int
	served   map[string]*atomic.Int64
}

func (rr *roundRobin) set(backends ...string) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	rr.backends = nil
	for _, b := range backends {
		u, _ := url.Parse("http://" + b)
		rr.backends = append(rr.backends, u)
		if rr.served[b] == nil {
			rr.served[b] = &atomic.Int64{}
		}
	}
}

func (rr *roundRobin) pick() *url.URL {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	u := rr.backends[rr.next%len(rr.backends)]
	rr.next++
	return u
}

func (rr *roundRobin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u := rr.pick()
	rr.served[u.Host].Add(1)
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.Out.Host = pr.In.Host },
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			// A backend going away mid-roll: 503 + Retry-After, which the
			// buyers retry, as behind a real load balancer.
			w.Header().Set("Retry-After", "1")
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		},
	}
	p.ServeHTTP(w, r)
}

// TestRollingUpgradeMidSale: the previous release and this tree serve one
// sale together, both directions of the mix (every buyer's calls alternate
// between the versions), with a rolling replacement of the old issuer and
// the old journal process half way; every invariant holds and the journal
// loses and refuses nothing.
func TestRollingUpgradeMidSale(t *testing.T) {
	from := PreviousRelease
	if v := os.Getenv("FLASHGATE_UPGRADE_FROM"); v != "" {
		from = v
	}
	began := time.Now()
	oldBin, newBin := buildPrevious(t, from), buildCurrent(t)
	t.Logf("built %s and this tree in %v", from, time.Since(began).Round(time.Millisecond))

	rs := redistest.Start(t)
	redisURL := "redis://" + rs.Addr + "/0"
	dsn := pgtest.Shared(t).NewDatabase(t)
	keysFile := filepath.Join(t.TempDir(), "keys.json")
	if b, err := exec.Command(newBin, "keys", "generate", "-file", keysFile).CombinedOutput(); err != nil {
		t.Fatalf("keys generate: %v\n%s", err, b)
	}
	const admin = "upgrade-test-admin-token-0123456789"
	serveEnv := func(addr string) []string {
		return []string{"REDIS_URL=" + redisURL, "FLASHGATE_ADDR=" + addr, "FLASHGATE_KEYS_FILE=" + keysFile,
			"FLASHGATE_ADMIN_TOKEN=" + admin, "FLASHGATE_ACCESS_LOG=false", "FLASHGATE_LOG_FORMAT=json",
			"FLASHGATE_ENTER_PER_USER=0", "FLASHGATE_STATUS_PER_USER=0", "FLASHGATE_EXCHANGE_PER_USER=0",
			"FLASHGATE_COMPLETE_PER_USER=0", "FLASHGATE_LEAVE_PER_USER=0", "FLASHGATE_SHUTDOWN_TIMEOUT=10s"}
	}
	journalEnv := func(addr, name string) []string {
		return []string{"REDIS_URL=" + redisURL, "FLASHGATE_JOURNAL_DSN=" + dsn, "FLASHGATE_JOURNAL_LISTEN=" + addr,
			"FLASHGATE_JOURNAL_CONSUMER=" + name}
	}
	// Journal first (docs/operations.md#upgrading): the old one, then a new one beside it.
	jOldAddr := freeAddr(t)
	jOld := start(t, "journal "+from, oldBin, []string{"journal", "run"}, journalEnv(jOldAddr, "old"), jOldAddr, "/healthz")
	jNewAddr := freeAddr(t)
	jNew := start(t, "journal new", newBin, []string{"journal", "run"}, journalEnv(jNewAddr, "new"), jNewAddr, "/healthz")
	sOldAddr, sNewAddr := freeAddr(t), freeAddr(t)
	sOld := start(t, "serve "+from, oldBin, []string{"serve"}, serveEnv(sOldAddr), sOldAddr, "/readyz")
	start(t, "serve new", newBin, []string{"serve"}, serveEnv(sNewAddr), sNewAddr, "/readyz")

	rr := &roundRobin{served: map[string]*atomic.Int64{}}
	rr.set(sOldAddr, sNewAddr)
	lb := &http.Server{Handler: rr, ReadHeaderTimeout: 5 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = lb.Serve(ln) }()
	t.Cleanup(func() { _ = lb.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const room = "upgrade"
	type result struct {
		rep *simulate.Report
		err error
	}
	sale := make(chan result, 1)
	go func() { // the sale; the test's goroutine rolls the processes meanwhile
		rep, err := simulate.Run(ctx, simulate.Options{
			Users: 400, Capacity: 40, RatePerMinute: 2400, SessionDuration: 5 * time.Second, Tick: 200 * time.Millisecond,
			Think: 300 * time.Millisecond, Ramp: 8 * time.Second, PollScale: 0.25, Room: room, Timeout: 50 * time.Second,
			IssuerURL: "http://" + ln.Addr().String(), AdminToken: admin, RetryFor: 20 * time.Second, Seed: 32,
		})
		sale <- result{rep, err}
	}()

	// Half way: the rolling update (a new issuer up, the old one out; the
	// old journal process out, what it had read written and acked first).
	time.Sleep(6 * time.Second)
	sNew2Addr := freeAddr(t)
	start(t, "serve new #2", newBin, []string{"serve"}, serveEnv(sNew2Addr), sNew2Addr, "/readyz")
	rr.set(sNewAddr, sNew2Addr) // the load balancer stops sending the old one new requests…
	time.Sleep(200 * time.Millisecond)
	sOld.stop(t) // …which drains its in-flight ones and exits 0
	jOld.stop(t)
	res := <-sale
	rep, err := res.rep, res.err
	require.NoError(t, err)
	var text strings.Builder
	_ = rep.WriteText(&text)
	t.Logf("%s", text.String())
	for addr, n := range rr.served {
		t.Logf("backend %s served %d requests", addr, n.Load())
		assert.Positive(t, n.Load(), "backend %s served nothing", addr)
	}
	assert.Empty(t, rep.Violations, "invariants")
	assert.True(t, rep.OK, "every buyer finished: %d errors, e.g. %v", rep.Errors, rep.ErrorSamples)
	assert.Zero(t, rep.Errors)

	// The journal: caught up, every event the issuers counted written, none refused.
	rdb := rs.Client(t)
	key := consumer.StreamKey(room)
	require.Eventually(t, func() bool {
		g, err := rdb.XInfoGroups(ctx, key).Result()
		if err != nil || len(g) != 1 {
			return false
		}
		last, err := rdb.XRevRangeN(ctx, key, "+", "-", 1).Result()
		return err == nil && len(last) == 1 && g[0].Pending == 0 && g[0].LastDeliveredID == last[0].ID
	}, 30*time.Second, 50*time.Millisecond, "the journal never caught up")
	epoch, err := rdb.HGet(ctx, roomkey.Key(room, roomkey.Config), "epoch").Result()
	require.NoError(t, err)
	store, err := journal.Open(ctx, dsn)
	require.NoError(t, err)
	defer store.Close()
	jr, err := store.Report(ctx, room, epoch)
	require.NoError(t, err)
	t.Logf("journal: entered %d, admitted %d, completed %d, abandoned %d; issuers: entered %d, admitted %d, completed %d",
		jr.Entered, jr.Admitted, jr.Completed, jr.Abandoned, rep.Server.Entered, rep.Server.Admitted, rep.Server.Completed)
	assert.EqualValues(t, rep.Server.Entered, jr.Entered, "entered events lost")
	assert.EqualValues(t, rep.Server.Admitted, jr.Admitted, "admitted events lost")
	assert.EqualValues(t, rep.Server.Completed, jr.Completed, "completed events lost")
	assert.Zero(t, metric(t, jNew.addr, "flashgate_journal_rejected_total"), "events refused by the journal")
	assert.Zero(t, metric(t, jNew.addr, "flashgate_journal_errors_total"), "journal errors")
	assert.Contains(t, jOld.log.String(), "journal", "the old journal process ran")
	t.Logf("whole test %v", time.Since(began).Round(time.Millisecond))
}

// metric sums a counter's series on a journal process's /metrics.
func metric(t *testing.T, addr, name string) float64 {
	t.Helper()
	res, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	var sum float64
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || strings.HasPrefix(line, "#") {
			continue
		}
		var v float64
		f := strings.Fields(line)
		if _, err := fmt.Sscan(f[len(f)-1], &v); err == nil {
			sum += v
		}
	}
	require.NoError(t, sc.Err())
	return sum
}
