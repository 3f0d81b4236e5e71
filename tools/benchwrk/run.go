package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// bencher holds what every run shares.
type bencher struct {
	o      options
	rdb    *redis.Client
	dir    string // temp dir: key ring, Lua scripts, pair files
	admin  string // FLASHGATE_ADMIN_TOKEN
	secret string // FLASHGATE_WAITING_SECRET
	procs  procSet
	client *http.Client
}

// wrkJob is a wrk invocation: the URL and, optionally, a Lua script and
// its arguments.
type wrkJob struct {
	url    string
	script string
	args   []string
}

// measure runs one row of one round: flush Redis, start the server, set up
// the row's state, run wrk with the CPU counters read around it, stop the
// server. last: the last round (profiles of spec.profiled() rows are taken
// then).
func (b *bencher) measure(ctx context.Context, spec rowSpec, round int, last bool, prev []run) run {
	r := run{Row: spec.name, Round: round, Duration: b.o.duration}
	if err := b.rdb.FlushAll(ctx).Err(); err != nil {
		r.Err = fmt.Errorf("FLUSHALL: %w", err)
		return r
	}
	srv, err := b.start(ctx, spec)
	if err != nil {
		r.Err = err
		return r
	}
	defer b.stopServer(srv)
	job, err := b.setup(ctx, spec, srv, round, prev)
	if err != nil {
		r.Err = fmt.Errorf("setup: %w", err)
		return r
	}
	var prof sync.WaitGroup
	if last && b.o.profile != "" && spec.profiled() {
		prof.Add(1)
		go func() { defer prof.Done(); b.fetchProfile(srv, spec.kind) }()
	}
	st0, stErr := scrapeStats(srv.base) // hello, or a binary without the series: no stats line
	redis0, err1 := b.redisCPU(ctx)
	srv0, err2 := procCPU(srv.pid())
	out, wrkCPU, err := b.wrk(ctx, job)
	redis1, err3 := b.redisCPU(ctx)
	srv1, err4 := procCPU(srv.pid())
	prof.Wait()
	if st1, err := scrapeStats(srv.base); stErr == nil && err == nil && !spec.hello {
		r.Stats = diffStats(st0, st1, batchOp[spec.kind])
	}
	for _, e := range []error{err1, err2, err3, err4} {
		if e != nil {
			r.Err = fmt.Errorf("CPU counters: %w", e)
			return r
		}
	}
	if err != nil {
		r.Err = err
		return r
	}
	if r.wrkResult, err = parseWrk(out); err != nil {
		r.Err = err
		return r
	}
	r.RedisCPU, r.ServerCPU, r.WrkCPU = redis1-redis0, srv1-srv0, wrkCPU
	return r
}

// redisCPU is Redis's used_cpu_sys + used_cpu_user so far.
func (b *bencher) redisCPU(ctx context.Context) (time.Duration, error) {
	info, err := b.rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	return parseInfoCPU(info)
}

// wrk runs wrk for job and returns its output and CPU time (user + system).
// Errors: wrk missing or failing (its output included).
func (b *bencher) wrk(ctx context.Context, job wrkJob) (string, time.Duration, error) {
	args := []string{"-t" + strconv.Itoa(b.o.threads), "-c" + strconv.Itoa(b.o.conns),
		"-d" + strconv.Itoa(int(math.Round(b.o.duration.Seconds()))) + "s"}
	if job.script != "" {
		args = append(args, "-s", filepath.Join(b.dir, job.script))
	}
	args = append(args, job.url)
	if len(job.args) > 0 {
		args = append(append(args, "--"), job.args...)
	}
	cmd := exec.Command("wrk", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", 0, fmt.Errorf("wrk: %w (scripts/install-wrk.sh installs it)", err)
	}
	b.procs.add(cmd)
	done := make(chan struct{})
	var werr error
	go func() { werr = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		b.procs.stop(cmd, done)
		return "", 0, ctx.Err()
	}
	b.procs.mu.Lock()
	delete(b.procs.procs, cmd)
	b.procs.mu.Unlock()
	if werr != nil {
		return "", 0, fmt.Errorf("wrk %s: %v: %s", strings.Join(args, " "), werr, strings.TrimSpace(out.String()))
	}
	return out.String(), cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), nil
}

// fetchProfile saves a CPU profile of srv (FLASHGATE_PPROF_ADDR) over the
// run, less a second, as <profile dir>/<kind>.pprof; a server without pprof
// (an older binary: refused or 404) is reported, not an error.
func (b *bencher) fetchProfile(srv *server, kind string) {
	secs := max(1, int(b.o.duration.Seconds())-1)
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", srv.pprof, secs)
	time.Sleep(300 * time.Millisecond) // let wrk start
	resp, err := http.Get(url)
	if err == nil && resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		err = fmt.Errorf("%s", resp.Status)
	}
	if err != nil {
		fmt.Printf("pprof not available (%v)\n", err)
		return
	}
	defer resp.Body.Close()
	path := filepath.Join(b.o.profile, kind+".pprof")
	f, err := os.Create(path)
	if err == nil {
		_, err = io.Copy(f, resp.Body)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Printf("pprof: %v\n", err)
		return
	}
	fmt.Printf("pprof: %s\n", path)
}

// Room names of the rows.
const (
	roomEnter    = "bench-enter"
	roomStatus   = "bench-status"
	roomExchange = "bench-exchange"
	roomComplete = "bench-complete"
)

// setup prepares spec's state through srv's own HTTP API and returns the
// wrk job that measures it.
func (b *bencher) setup(ctx context.Context, spec rowSpec, srv *server, round int, prev []run) (wrkJob, error) {
	if b.client == nil {
		b.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			MaxIdleConnsPerHost: setupConns, DisableCompression: true}}
	}
	threads := strconv.Itoa(b.o.threads)
	switch spec.kind {
	case "hello":
		return wrkJob{url: srv.base + "/hello"}, nil
	case "ping":
		return wrkJob{url: srv.base + "/ping"}, nil
	case kindBatchPing, kindBatchEnter:
		// New users per request, as in the enter row (lua/enter.lua);
		// measure's FLUSHALL has emptied the batched-enter keys.
		path := "/batched"
		if spec.kind == kindBatchEnter {
			path = "/batched-enter"
		}
		return wrkJob{url: srv.base + path, script: "enter.lua", args: []string{"r" + strconv.Itoa(round)}}, nil
	case "jwks":
		return wrkJob{url: srv.base + "/.well-known/jwks.json"}, nil
	case "enter":
		if err := b.putRoom(srv, roomEnter, "paused", 100, fastRate); err != nil {
			return wrkJob{}, err
		}
		return wrkJob{url: srv.base + "/v1/rooms/" + roomEnter + "/enter", script: "enter.lua",
			args: []string{"r" + strconv.Itoa(round)}}, nil
	case "status", kindStatusSnap:
		if err := b.putRoom(srv, roomStatus, "paused", 100, statusRate); err != nil {
			return wrkJob{}, err
		}
		pairs, err := b.enterUsers(ctx, srv, roomStatus, b.o.statusUsers)
		if err != nil {
			return wrkJob{}, err
		}
		file, err := b.writePairs("status", pairs)
		return wrkJob{url: srv.base + "/v1/rooms/" + roomStatus + "/status", script: "pairs.lua",
			args: []string{file, threads, "cycle", "GET"}}, err
	case "exchange":
		pairs, err := b.activeUsers(ctx, srv, roomExchange, b.o.exchangeUsers)
		if err != nil {
			return wrkJob{}, err
		}
		file, err := b.writePairs("exchange", pairs)
		return wrkJob{url: srv.base + "/v1/rooms/" + roomExchange + "/exchange", script: "pairs.lua",
			args: []string{file, threads, "cycle", "POST"}}, err
	case "complete":
		n := b.completeTokens(spec, prev)
		pairs, err := b.activeUsers(ctx, srv, roomComplete, n)
		if err != nil {
			return wrkJob{}, err
		}
		progress("  %s: exchanging %d users for admission tokens", spec.name, n)
		tokens, err := b.each(ctx, n, func(i int) (string, error) {
			var out struct {
				Token string `json:"admission_token"`
			}
			err := b.call(srv, "POST", "/v1/rooms/"+roomComplete+"/exchange", pairs[i][0], pairs[i][1], &out)
			return out.Token, err
		})
		if err != nil {
			return wrkJob{}, err
		}
		for i := range pairs {
			pairs[i][1] = tokens[i]
		}
		file, err := b.writePairs("complete", pairs)
		return wrkJob{url: srv.base + "/v1/complete?product=" + roomComplete, script: "pairs.lua",
			args: []string{file, threads, "once", "POST"}}, err
	}
	return wrkJob{}, fmt.Errorf("unknown row kind %q", spec.kind)
}

// completeTokens is how many admission tokens a complete run gets: twice
// what the fastest of the row's earlier runs and of the exchange runs of the
// same journal setting (which cost about as much) did per second, over the
// duration, within -complete-min … -complete-max. The margin is for a
// machine that is faster now than then: a run that runs out anyway is
// flagged (lua/pairs.lua "once"), its req/s a lower bound.
func (b *bencher) completeTokens(spec rowSpec, prev []run) int {
	exchange := rowExchange
	if spec.journal == "off" {
		exchange = rowExchangeOff
	}
	rate := 0.0
	for _, r := range prev {
		if r.ok() && (r.Row == spec.name || r.Row == exchange) {
			rate = max(rate, r.PerSec)
		}
	}
	n := int(2 * rate * b.o.duration.Seconds())
	return min(max(n, b.o.completeMin), b.o.completeMax)
}

// Admission rates (per minute) of the rows' rooms.
const (
	// fastRate admits up to 10,000 per 100 ms tick (the batch): the
	// exchange and complete rooms fill at once.
	fastRate = 10_000_000
	// statusRate is the status rooms' (paused: nobody is admitted): 100
	// per second, so that the status snapshot's "near the head" band
	// (issuer/snapshot.go nearHead: 2 × the admissions of the snapshot's
	// age + 2 ticks, at least 50) is 140 entries and the snapshot answers
	// the other 98.6 % of the 10,000 (at fastRate the band, 233,338, would
	// hold the whole line and the snapshot row would measure the exact
	// path). The exact script's cost does not depend on the rate.
	statusRate = 6000
)

// putRoom creates room through the admin API: state "paused" or "open",
// capacity users at once, admitting ratePerMinute (at most 10,000 per 100 ms
// tick), 15-minute (the longest) sessions, no arrival window (docs/http-api.md "HTTP
// API", PUT /admin/rooms/{room}).
func (b *bencher) putRoom(srv *server, room, state string, capacity, ratePerMinute int) error {
	body := fmt.Sprintf(`{"capacity":%d,"rate_per_minute":%d,"session_ms":900000,"tick_ms":100,"batch":10000,"arrival_window_ms":0,"state":%q}`,
		capacity, ratePerMinute, state)
	req, _ := http.NewRequest("PUT", srv.base+"/admin/rooms/"+room, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+b.admin)
	req.Header.Set("Content-Type", "application/json")
	return b.do(req, nil)
}

// activeUsers creates an open room of capacity n, enters n users and
// waits until every one is admitted (the admin stats' live count);
// returns their (user, waiting token) pairs.
func (b *bencher) activeUsers(ctx context.Context, srv *server, room string, n int) ([][2]string, error) {
	if err := b.putRoom(srv, room, "open", n, fastRate); err != nil {
		return nil, err
	}
	pairs, err := b.enterUsers(ctx, srv, room, n)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var st struct {
			Live int `json:"live"`
		}
		req, _ := http.NewRequest("GET", srv.base+"/admin/rooms/"+room+"/stats", nil)
		req.Header.Set("Authorization", "Bearer "+b.admin)
		if err := b.do(req, &st); err != nil {
			return nil, err
		}
		if st.Live >= n {
			return pairs, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %d of %d users admitted after 2 minutes", room, st.Live, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// enterUsers enters n new users (b<i>) into room; returns their (user,
// waiting token) pairs in order.
func (b *bencher) enterUsers(ctx context.Context, srv *server, room string, n int) ([][2]string, error) {
	progress("  %s: entering %d users", room, n)
	toks, err := b.each(ctx, n, func(i int) (string, error) {
		var e struct {
			Token string `json:"waiting_token"`
		}
		err := b.call(srv, "POST", "/v1/rooms/"+room+"/enter", "b"+strconv.Itoa(i), "", &e)
		return e.Token, err
	})
	if err != nil {
		return nil, err
	}
	pairs := make([][2]string, n)
	for i, t := range toks {
		pairs[i] = [2]string{"b" + strconv.Itoa(i), t}
	}
	return pairs, nil
}

// setupConns is how many requests the setup steps send at once.
const setupConns = 64

// each calls f(0) … f(n-1) on setupConns goroutines and returns the
// results in order, or the first error.
func (b *bencher) each(ctx context.Context, n int, f func(int) (string, error)) ([]string, error) {
	out := make([]string, n)
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range setupConns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				s, err := f(i)
				if err == nil && s == "" {
					err = fmt.Errorf("request %d: empty answer", i)
				}
				if err != nil {
					once.Do(func() { first = err })
					next.Store(int64(n))
					return
				}
				out[i] = s
			}
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return out, first
}

// call sends a /v1 request as user (with the waiting token tok, if any) and
// decodes the 200 answer into out.
func (b *bencher) call(srv *server, method, path, user, tok string, out any) error {
	req, _ := http.NewRequest(method, srv.base+path, nil)
	req.Header.Set("X-User-ID", user)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	return b.do(req, out)
}

// do sends req and decodes a 2xx answer's JSON into out (nil: discarded).
// Errors: transport errors, any other status (with the body).
func (b *bencher) do(req *http.Request, out any) error {
	resp, err := b.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", req.Method, req.URL.Path, resp.Status, body)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(body, out)
}

// writePairs writes "user token" lines for lua/pairs.lua; returns the path.
func (b *bencher) writePairs(name string, pairs [][2]string) (string, error) {
	var buf bytes.Buffer
	for _, p := range pairs {
		fmt.Fprintf(&buf, "%s %s\n", p[0], p[1])
	}
	path := filepath.Join(b.dir, name+".pairs")
	return path, os.WriteFile(path, buf.Bytes(), 0o600)
}

// progress prints a setup step (stderr, so the results stay on stdout).
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}
