//go:build linux

package streams

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/testing/redistest"
)

// BenchmarkStreams holds FLASHGATE_STREAMS (default 20,000) event streams
// of one room open on two `flashgate serve` replicas (half each; a
// private redis-server, loopback) and reports, per replica (logged) and in
// total (metrics):
//
//   - B/stream: the replicas' Go heap in use + goroutine stacks
//     (/metrics, after a GC forced through FLASHGATE_PPROF_ADDR's
//     /debug/pprof/heap?gc=1) grown from before the streams to while they
//     are open, per stream; rss-B/stream: their resident sets'
//     (/proc/<pid>/status VmRSS) growth; goroutines/stream (go_goroutines);
//   - redis-cmds/tick: Redis commands (INFO commandstats, the commands
//     scripts run included, INFO itself not) over a 15 s window — a whole
//     poll cycle: a waiting stream of a paused room is due every 8–12 s
//     (poll_after), so every stream is placed at least once in it — ÷ the
//     room's ticks in it (flashgate_tick_duration_seconds_count, both replicas),
//     with the streams open, and the same window with none
//     (redis-cmds/tick-none): the limit row of a room nobody watches;
//   - open-ms-p50/p99/max and pause-ms-…: from an admin state change on
//     replica A (pause → open, then open → pause) to each stream's first
//     line showing room_state "open" (resp. "paused"); replica A's feed
//     reads at once, replica B's at its next news read (≤ 1 s later);
//   - bare-…: the limit row, the same clients against a bare Go server
//     per replica (one goroutine per held connection; one event written to
//     every connection in turn on a signal): its memory and goroutines per
//     connection and its fan-out times.
//
// One process cannot hold 20,000 streams: each costs a descriptor on
// either side, and RLIMIT_NOFILE (20,000 on the project's VM, not
// raisable) bounds a process. So the clients run in child processes (this
// binary, FLASHGATE_STREAMS_ROLE=client), each holding at most 10,000
// streams to one replica from source addresses 127.<20+child>.y.z (100
// streams each, the default FLASHGATE_STREAMS_PER_ADDRESS), and a replica
// holds at most 10,000; more streams than the limit allows are capped and
// the number held is reported (streams). FLASHGATE_BIN runs another
// `flashgate` binary (an older commit's: the before) instead of building
// this tree's. The replicas run in header
// identity mode (X-User-ID; no per-address limits apply then) with the
// access log off. A run takes about a minute.
func BenchmarkStreams(b *testing.B) {
	n := 20000
	if v := os.Getenv("FLASHGATE_STREAMS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 100 {
			b.Fatalf("FLASHGATE_STREAMS=%q: want a number >= 100", v)
		}
	}
	for range b.N {
		runStreams(b, n)
	}
}

// replica is one `flashgate serve` of the benchmark.
type replica struct {
	name                string
	cmd                 *exec.Cmd
	api, metrics, pprof string
	log                 *os.File
	done                chan struct{}
	streams             int // held by its clients
	before, after       memStats
	tick0, tick1, tick2 float64 // flashgate_tick_duration_seconds_count at the windows' edges
	tick3               float64
	cpu0, cpu1, cpu2    float64 // process_cpu_seconds_total at the windows' edges
	cpu3                float64
	gaugeOpen           float64
	lat                 map[string][]float64 // state → ms per stream
	ready               time.Duration        // all its clients' streams opened
	openFailed          int
}

type memStats struct {
	heapStack, goroutines, rss float64
}

const adminToken = "streams-bench-admin-token-0123456789abcdef"

func runStreams(b *testing.B, n int) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
	// A process's streams: its descriptors less a margin for the Redis
	// pool, listeners, pipes and files.
	perProc := int(min(10000, int64(lim.Max)-1000))
	if perProc < 50 {
		b.Fatalf("RLIMIT_NOFILE %d leaves no room for streams", lim.Max)
	}
	if n > 2*perProc {
		b.Logf("FLASHGATE_STREAMS=%d: RLIMIT_NOFILE %d allows %d per process; holding %d", n, lim.Max, perProc, 2*perProc)
		n = 2 * perProc
	}
	children := 2 * ((n + 2*perProc - 1) / (2 * perProc)) // even: half to each replica
	dir := b.TempDir()
	bin := os.Getenv("FLASHGATE_BIN") // another build (an older commit's) gives the before
	if bin == "" {
		bin = build(b, dir)
	}
	rs := redistest.Start(b)
	rdb := rs.Client(b)
	ctx := context.Background()

	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	env := []string{
		"REDIS_URL=redis://" + rs.Addr + "/0",
		"FLASHGATE_ADMIN_TOKEN=" + adminToken,
		"FLASHGATE_WAITING_SECRET=" + base64.StdEncoding.EncodeToString(secret),
		"FLASHGATE_KEYS_FILE=" + filepath.Join(dir, "keys.json"),
		"FLASHGATE_ACCESS_LOG=false",
	}
	ra := startReplica(b, "A", bin, dir, env) // creates the key ring B reads
	rb := startReplica(b, "B", bin, dir, env)
	reps := []*replica{ra, rb}

	room := "streams-bench"
	admin(b, ra, http.MethodPut, "/admin/rooms/"+room,
		`{"state":"paused","capacity":1,"rate_per_minute":60,"session_ms":900000,"arrival_window_ms":0}`)
	t := time.Now()
	toks := enter(b, ra, room, n)
	b.Logf("entered %d users in %s", n, time.Since(t).Round(time.Millisecond))
	files := make([]string, children)
	for c := range children {
		var sb strings.Builder
		for i := c; i < n; i += children {
			fmt.Fprintf(&sb, "u%06d %s\n", i, toks[i])
		}
		files[c] = filepath.Join(dir, fmt.Sprintf("users-%d.txt", c))
		if err := os.WriteFile(files[c], []byte(sb.String()), 0o600); err != nil {
			b.Fatal(err)
		}
	}

	// The limit row of Redis: the same window with no stream open.
	time.Sleep(time.Second)
	for _, r := range reps {
		r.before = r.mem(b)
		r.tick0 = r.metric(b, "flashgate_tick_duration_seconds_count")
		r.cpu0 = r.metric(b, "process_cpu_seconds_total")
	}
	c0 := redisCalls(b, rdb, ctx)
	const window = 15 * time.Second // > the longest poll_after of a paused room (12 s)
	time.Sleep(window)
	c1 := redisCalls(b, rdb, ctx)
	for _, r := range reps {
		r.tick1 = r.metric(b, "flashgate_tick_duration_seconds_count")
		r.cpu1 = r.metric(b, "process_cpu_seconds_total")
	}

	t = time.Now()
	clients := make([]*child, children)
	for c := range children {
		r := reps[c%2]
		clients[c] = startChild(b, fmt.Sprintf("client-%d", c), dir, "client",
			targetEnv+"="+r.api, roomEnv+"="+room, usersEnv+"="+files[c], octetEnv+"="+strconv.Itoa(20+c))
	}
	held := awaitReady(b, clients, reps)
	b.Logf("%d streams open in %s (%d failed)", held, time.Since(t).Round(time.Millisecond), ra.openFailed+rb.openFailed)
	if held == 0 {
		b.Fatal("no stream opened")
	}

	count := func() float64 { // status events the clients received so far
		var n float64
		for _, c := range clients {
			c.send(b, "count")
			v, _ := strconv.ParseFloat(strings.TrimPrefix(c.expect(b, "count ", 10*time.Second), "count "), 64)
			n += v
		}
		return n
	}
	for _, r := range reps {
		r.tick2 = r.metric(b, "flashgate_tick_duration_seconds_count")
		r.cpu2 = r.metric(b, "process_cpu_seconds_total")
	}
	ev0 := count()
	c2 := redisCalls(b, rdb, ctx)
	time.Sleep(window)
	c3 := redisCalls(b, rdb, ctx)
	ev1 := count()
	for _, r := range reps {
		r.tick3 = r.metric(b, "flashgate_tick_duration_seconds_count")
		r.cpu3 = r.metric(b, "process_cpu_seconds_total")
		r.after = r.mem(b)
		r.gaugeOpen = r.metric(b, "flashgate_sse_streams_open")
		if int(r.gaugeOpen) != r.streams {
			b.Errorf("replica %s: flashgate_sse_streams_open %.0f, its clients hold %d", r.name, r.gaugeOpen, r.streams)
		}
	}

	for _, ch := range []struct{ path, state string }{{"open", "open"}, {"pause", "paused"}} {
		stateChange(b, clients, reps, ch.state, func() {
			admin(b, ra, http.MethodPost, "/admin/rooms/"+room+"/"+ch.path, `{}`)
		})
	}
	for _, c := range clients {
		c.stop()
	}

	// The limit row of memory and fan-out: bare servers, the same clients.
	bare := []*replica{{name: "bare-A", lat: map[string][]float64{}}, {name: "bare-B", lat: map[string][]float64{}}}
	bareProcs := make([]*child, 2)
	for i, r := range bare {
		bareProcs[i] = startChild(b, r.name, dir, "bare")
		r.api = strings.TrimPrefix(bareProcs[i].expect(b, "listen ", 10*time.Second), "listen ")
		r.before = bareMem(b, bareProcs[i])
	}
	t = time.Now()
	bareClients := make([]*child, children)
	for c := range children {
		bareClients[c] = startChild(b, fmt.Sprintf("bare-client-%d", c), dir, "client",
			targetEnv+"="+bare[c%2].api, roomEnv+"="+room, usersEnv+"="+files[c], octetEnv+"="+strconv.Itoa(20+c))
	}
	bareHeld := awaitReady(b, bareClients, bare)
	b.Logf("bare: %d connections open in %s", bareHeld, time.Since(t).Round(time.Millisecond))
	for i, r := range bare {
		r.after = bareMem(b, bareProcs[i])
	}
	stateChange(b, bareClients, bare, "open", func() {
		for _, p := range bareProcs {
			p.send(b, "fanout open") // both at once: each writes in its own process
		}
		for _, p := range bareProcs {
			b.Logf("%s: wrote the event to every connection in %s ms", p.name, strings.TrimPrefix(p.expect(b, "sent ", 30*time.Second), "sent "))
		}
	})
	for _, c := range bareClients {
		c.stop()
	}
	for _, p := range bareProcs {
		p.stop()
	}

	// Report.
	perStream := func(rs []*replica, f func(memStats) float64) float64 {
		var d float64
		var k int
		for _, r := range rs {
			d += f(r.after) - f(r.before)
			k += r.streams
		}
		return d / float64(max(k, 1))
	}
	heap := func(m memStats) float64 { return m.heapStack }
	rss := func(m memStats) float64 { return m.rss }
	gor := func(m memStats) float64 { return m.goroutines }
	ticksNone, ticksOpen := 0.0, 0.0
	for _, r := range reps {
		ticksNone += r.tick1 - r.tick0
		ticksOpen += r.tick3 - r.tick2
	}
	cmdsNone, perNone := callsBetween(c0, c1)
	cmdsOpen, perOpen := callsBetween(c2, c3)
	for _, r := range reps {
		b.Logf("%s: %d streams (gauge %.0f), opened in %s; heap+stacks %.1f → %.1f MB (%.0f B/stream), rss %.1f → %.1f MB (%.0f B/stream), goroutines %.0f → %.0f (%.3f/stream); ticks %.0f, %.0f",
			r.name, r.streams, r.gaugeOpen, r.ready.Round(time.Millisecond),
			r.before.heapStack/1e6, r.after.heapStack/1e6, perStream([]*replica{r}, heap),
			r.before.rss/1e6, r.after.rss/1e6, perStream([]*replica{r}, rss),
			r.before.goroutines, r.after.goroutines, perStream([]*replica{r}, gor), r.tick1-r.tick0, r.tick3-r.tick2)
		for _, s := range []string{"open", "paused"} {
			b.Logf("%s: → %s at %d streams: p50 %.0f ms, p99 %.0f ms, max %.0f ms", r.name, s, len(r.lat[s]),
				pct(r.lat[s], .5), pct(r.lat[s], .99), pct(r.lat[s], 1))
		}
	}
	b.Logf("redis: %.0f commands in %s with %d streams open (%.0f ticks: %.1f/tick), %.0f with none (%.0f ticks: %.1f/tick)",
		cmdsOpen, window, held, ticksOpen, cmdsOpen/ticksOpen, cmdsNone, ticksNone, cmdsNone/ticksNone)
	b.Logf("redis commands with the streams open: %s; with none: %s", perOpen, perNone)
	for _, r := range bare {
		b.Logf("%s: %d connections; heap+stacks %.0f B/conn, rss %.0f B/conn, %.3f goroutines/conn; fan-out p50 %.0f ms, p99 %.0f ms, max %.0f ms",
			r.name, r.streams, perStream([]*replica{r}, heap), perStream([]*replica{r}, rss), perStream([]*replica{r}, gor),
			pct(r.lat["open"], .5), pct(r.lat["open"], .99), pct(r.lat["open"], 1))
	}
	all := func(rs []*replica, s string) []float64 {
		var l []float64
		for _, r := range rs {
			l = append(l, r.lat[s]...)
		}
		slices.Sort(l)
		return l
	}
	// The replicas' CPU for the streams' periodic events: the window with
	// the streams open less the one with none, per event the clients got.
	cpuNone, cpuOpen := 0.0, 0.0
	for _, r := range reps {
		cpuNone += r.cpu1 - r.cpu0
		cpuOpen += r.cpu3 - r.cpu2
	}
	evs := ev1 - ev0
	b.Logf("replicas' CPU: %.2f s in %s with %d streams open (%.0f status events: %.0f/s), %.2f s with none: %.1f µs per event",
		cpuOpen, window, held, evs, evs/window.Seconds(), cpuNone, (cpuOpen-cpuNone)/max(evs, 1)*1e6)
	b.ReportMetric((cpuOpen-cpuNone)/max(evs, 1)*1e6, "server-µs/event")
	b.ReportMetric(evs/window.Seconds(), "events/s")
	b.ReportMetric(float64(held), "streams")
	b.ReportMetric(perStream(reps, heap), "B/stream")
	b.ReportMetric(perStream(reps, rss), "rss-B/stream")
	b.ReportMetric(perStream(reps, gor), "goroutines/stream")
	b.ReportMetric(cmdsOpen/ticksOpen, "redis-cmds/tick")
	b.ReportMetric(cmdsNone/ticksNone, "redis-cmds/tick-none")
	b.ReportMetric(cmdsOpen/window.Seconds(), "redis-cmds/s")
	b.ReportMetric(cmdsNone/window.Seconds(), "redis-cmds/s-none")
	for _, s := range []string{"open", "paused"} {
		l := all(reps, s)
		name := strings.TrimSuffix(s, "d") // open, pause
		b.ReportMetric(pct(l, .5), name+"-ms-p50")
		b.ReportMetric(pct(l, .99), name+"-ms-p99")
		b.ReportMetric(pct(l, 1), name+"-ms-max")
	}
	l := all(bare, "open")
	b.ReportMetric(perStream(bare, heap), "bare-B/conn")
	b.ReportMetric(perStream(bare, rss), "bare-rss-B/conn")
	b.ReportMetric(perStream(bare, gor), "bare-goroutines/conn")
	b.ReportMetric(pct(l, .5), "bare-ms-p50")
	b.ReportMetric(pct(l, .99), "bare-ms-p99")
	b.ReportMetric(pct(l, 1), "bare-ms-max")
}

// pct is the q-quantile of sorted l (nearest rank; NaN when l is empty).
func pct(l []float64, q float64) float64 {
	if len(l) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(l)))) - 1
	return l[min(max(i, 0), len(l)-1)]
}

// build builds ./cmd/flashgate of this tree into dir.
func build(b *testing.B, dir string) string {
	b.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(dir, "flashgate")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/flashgate")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build ./cmd/flashgate: %v\n%s", err, out)
	}
	return bin
}

func freeAddr(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startReplica runs `flashgate serve` with env on free loopback ports
// (API, metrics, pprof) and waits for its /readyz; it is killed at cleanup.
func startReplica(b *testing.B, name, bin, dir string, env []string) *replica {
	b.Helper()
	r := &replica{name: name, api: freeAddr(b), metrics: freeAddr(b), pprof: freeAddr(b), done: make(chan struct{}),
		lat: map[string][]float64{}}
	var err error
	if r.log, err = os.Create(filepath.Join(dir, "replica-"+name+".log")); err != nil {
		b.Fatal(err)
	}
	r.cmd = exec.Command(bin, "serve")
	r.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"FLASHGATE_ADDR=" + r.api, "FLASHGATE_METRICS_ADDR=" + r.metrics, "FLASHGATE_PPROF_ADDR=" + r.pprof}, env...)
	r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // even if this process dies
	if err := r.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() { _ = r.cmd.Wait(); close(r.done) }()
	b.Cleanup(func() {
		_ = r.cmd.Process.Kill()
		<-r.done
		if b.Failed() {
			out, _ := os.ReadFile(r.log.Name())
			b.Logf("--- replica %s log (tail):\n%s", name, tail(string(out), 30))
		}
		_ = r.log.Close()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := http.Get("http://" + r.api + "/readyz")
		if err == nil {
			_ = res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return r
			}
		}
		select {
		case <-r.done:
			out, _ := os.ReadFile(r.log.Name())
			b.Fatalf("replica %s exited:\n%s", name, out)
		default:
		}
		if time.Now().After(deadline) {
			b.Fatalf("replica %s not ready after 30 s", name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// admin calls r's admin API and fails on an answer other than 2xx.
func admin(b *testing.B, r *replica, method, path, body string) {
	b.Helper()
	req, err := http.NewRequest(method, "http://"+r.api+path, strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	out, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode/100 != 2 {
		b.Fatalf("%s %s: %d %s", method, path, res.StatusCode, out)
	}
}

// enter enters users u000000 … into room through r (64 at a time) and
// returns their waiting tokens.
func enter(b *testing.B, r *replica, room string, n int) []string {
	b.Helper()
	cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 10 * time.Second}
	defer cl.CloseIdleConnections()
	toks := make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failure error
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				req, _ := http.NewRequest(http.MethodPost, "http://"+r.api+"/v1/rooms/"+room+"/enter", strings.NewReader(`{}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-User-ID", fmt.Sprintf("u%06d", i))
				res, err := cl.Do(req)
				var e struct {
					WaitingToken string `json:"waiting_token"`
				}
				if err == nil {
					body, _ := io.ReadAll(res.Body)
					_ = res.Body.Close()
					if err = json.Unmarshal(body, &e); err == nil && (res.StatusCode/100 != 2 || e.WaitingToken == "") {
						err = fmt.Errorf("enter: %d %s", res.StatusCode, body)
					}
				}
				if err != nil {
					mu.Lock()
					failure = err
					mu.Unlock()
					return
				}
				toks[i] = e.WaitingToken
			}
		}()
	}
	wg.Wait()
	if failure != nil {
		b.Fatal(failure)
	}
	return toks
}

// get answers GET url's body.
func get(b *testing.B, url string) string {
	b.Helper()
	res, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %d %v", url, res.StatusCode, err)
	}
	return string(out)
}

// metric is the value of r's /metrics series name (a series without
// labels; 0 when absent).
func (r *replica) metric(b *testing.B, name string) float64 {
	b.Helper()
	return metricOf(get(b, "http://"+r.metrics+"/metrics"), name)
}

func metricOf(text, name string) float64 {
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}

// mem is r's memory after a GC (forced through pprof's heap?gc=1).
func (r *replica) mem(b *testing.B) memStats {
	b.Helper()
	get(b, "http://"+r.pprof+"/debug/pprof/heap?gc=1")
	text := get(b, "http://"+r.metrics+"/metrics")
	return memStats{
		heapStack:  metricOf(text, "go_memstats_heap_inuse_bytes") + metricOf(text, "go_memstats_stack_inuse_bytes"),
		goroutines: metricOf(text, "go_goroutines"),
		rss:        float64(rssOf(r.cmd.Process.Pid)),
	}
}

func bareMem(b *testing.B, p *child) memStats {
	b.Helper()
	p.send(b, "mem")
	f := strings.Fields(p.expect(b, "mem ", 30*time.Second))
	var v [4]float64
	for i := range v {
		v[i], _ = strconv.ParseFloat(f[i+1], 64)
	}
	return memStats{heapStack: v[0], goroutines: v[1], rss: v[2]}
}

// redisCalls is INFO commandstats' calls per command, INFO's own left
// out (the commands scripts run are counted too).
func redisCalls(b *testing.B, rdb *redis.Client, ctx context.Context) map[string]int64 {
	b.Helper()
	out, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	calls := map[string]int64{}
	for _, line := range strings.Split(out, "\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok || !strings.HasPrefix(line, "cmdstat_") || name == "info" {
			continue
		}
		if _, v, ok := strings.Cut(rest, "calls="); ok {
			v, _, _ = strings.Cut(v, ",")
			calls[name], _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return calls
}

// callsBetween is the commands from c0 to c1: their sum, and per command
// ("name n", most first).
func callsBetween(c0, c1 map[string]int64) (float64, string) {
	var all int64
	var per []string
	for name, n := range c1 {
		if d := n - c0[name]; d > 0 {
			all += d
			per = append(per, fmt.Sprintf("%s %d", name, d))
		}
	}
	slices.SortFunc(per, func(a, b string) int {
		x, _ := strconv.Atoi(a[strings.IndexByte(a, ' ')+1:])
		y, _ := strconv.Atoi(b[strings.IndexByte(b, ' ')+1:])
		return y - x
	})
	return float64(all), strings.Join(per, ", ")
}

// child is a process of this binary in a role (child_test.go).
type child struct {
	name  string
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
	log   *os.File
	done  chan struct{}
}

// startChild runs this test binary in role with env; it is stopped at
// cleanup (stdin closed, then killed after 5 s).
func startChild(b *testing.B, name, dir, role string, env ...string) *child {
	b.Helper()
	c := &child{name: name, lines: make(chan string, 16), done: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	c.cmd.Env = append(os.Environ(), append([]string{roleEnv + "=" + role}, env...)...)
	var err error
	if c.log, err = os.Create(filepath.Join(dir, name+".log")); err != nil {
		b.Fatal(err)
	}
	c.cmd.Stderr = c.log
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if c.in, err = c.cmd.StdinPipe(); err != nil {
		b.Fatal(err)
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 64<<20) // a report holds every latency
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		_ = c.cmd.Wait()
		close(c.done)
	}()
	b.Cleanup(func() {
		c.stop()
		if b.Failed() {
			out, _ := os.ReadFile(c.log.Name())
			if len(out) > 0 {
				b.Logf("--- %s stderr (tail):\n%s", name, tail(string(out), 20))
			}
		}
		_ = c.log.Close()
	})
	return c
}

func (c *child) send(b *testing.B, line string) {
	b.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		b.Fatalf("%s: %v", c.name, err)
	}
}

// expect waits for c's next line and fails unless it starts with prefix.
func (c *child) expect(b *testing.B, prefix string, wait time.Duration) string {
	b.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			b.Fatalf("%s exited", c.name)
		}
		if !strings.HasPrefix(l, prefix) {
			b.Fatalf("%s: %q, want %q…", c.name, l, prefix)
		}
		return l
	case <-time.After(wait):
		b.Fatalf("%s: no %q… after %s", c.name, prefix, wait)
	}
	return ""
}

// stop closes c's stdin (it exits, its connections with it) and kills it
// if it has not exited within 5 s. Idempotent.
func (c *child) stop() {
	_ = c.in.Close()
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// awaitReady waits for every client's "ready" line and adds its streams to
// its server (reps[child%2]); it returns the streams held in all.
func awaitReady(b *testing.B, clients []*child, reps []*replica) int {
	b.Helper()
	start := time.Now()
	held := 0
	for i, c := range clients {
		f := strings.Fields(c.expect(b, "ready ", 2*time.Minute))
		opened, _ := strconv.Atoi(f[1])
		failed, _ := strconv.Atoi(f[2])
		if failed > 0 {
			b.Logf("%s: %d streams failed to open (first: %s)", c.name, failed, f[4])
		}
		r := reps[i%2]
		r.streams += opened
		r.openFailed += failed
		r.ready = max(r.ready, time.Since(start))
		held += opened
	}
	return held
}

// stateChange arms every client for room_state state, runs change (the
// admin call) at t0, waits until every open stream has shown state (30 s
// at most), and records each stream's time from t0 on its server.
func stateChange(b *testing.B, clients []*child, reps []*replica, state string, change func()) {
	b.Helper()
	for _, c := range clients {
		c.send(b, "arm "+state)
	}
	for _, c := range clients {
		c.expect(b, "armed", 10*time.Second)
	}
	t0 := time.Now()
	change()
	for _, c := range clients {
		if f := strings.Fields(c.expect(b, "seen ", time.Minute)); f[2] != "0" {
			b.Errorf("%s: %s streams did not show room_state %q within 30 s", c.name, f[2], state)
		}
	}
	for i, c := range clients {
		c.send(b, "report "+strconv.FormatInt(t0.UnixNano(), 10))
		var r clientReport
		if err := json.Unmarshal([]byte(c.expect(b, "{", 30*time.Second)), &r); err != nil {
			b.Fatalf("%s: report: %v", c.name, err)
		}
		if r.Ended > 0 {
			b.Logf("%s: %d streams ended before showing room_state %q (admitted, or cut)", c.name, r.Ended, state)
		}
		rep := reps[i%2]
		rep.lat[state] = append(rep.lat[state], r.LatMs...)
		slices.Sort(rep.lat[state])
	}
}
