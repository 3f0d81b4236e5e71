package main

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return string(b)
}

// The samples in testdata/ are real outputs of Debian's wrk 4.1.0 (hello:
// the bare server; errors: a 404 path while the server was killed
// mid-run; pairs-out: lua/pairs.lua in "once" mode with 2 pairs per thread;
// refused: nothing listening).
func TestParseWrk(t *testing.T) {
	for _, tc := range []struct {
		file   string
		want   wrkResult
		failed bool
	}{
		{"hello.txt", wrkResult{Requests: 81616, PerSec: 74219.24}, false},
		{"hello-latency.txt", wrkResult{Requests: 72631, PerSec: 72416.43}, false},
		{"errors.txt", wrkResult{Requests: 53130, PerSec: 26537.16, Non2xx: 53130, SocketErrors: 66 + 111990}, true},
		{"pairs-out.txt", wrkResult{Requests: 1, PerSec: 1, ThreadsOut: 2}, false},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := parseWrk(readTestdata(t, tc.file))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.failed, got.failed())
		})
	}
	_, err := parseWrk(readTestdata(t, "refused.txt"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "unable to connect")
}

// TestFailedShare: a run fails above 0.1 % non-2xx answers plus socket
// errors, or with no request at all.
func TestFailedShare(t *testing.T) {
	assert.False(t, wrkResult{Requests: 10000, Non2xx: 5, SocketErrors: 5}.failed())
	assert.True(t, wrkResult{Requests: 10000, Non2xx: 5, SocketErrors: 6}.failed())
	assert.True(t, wrkResult{Requests: 10000, SocketErrors: 11}.failed())
	assert.True(t, wrkResult{}.failed())
}

// TestPairsScriptMatchesParser: the line lua/pairs.lua's done() writes is
// the one parseWrk reads.
func TestPairsScriptMatchesParser(t *testing.T) {
	lua, err := luaScripts.ReadFile("lua/pairs.lua")
	require.NoError(t, err)
	const format = `"threads out of pairs: %d\n"`
	require.Contains(t, string(lua), format)
	assert.Equal(t, 3, must(parseWrk(readTestdata(t, "hello.txt")+"threads out of pairs: 3\n")).ThreadsOut)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestMedian(t *testing.T) {
	xs := []float64{5, 1, 3}
	assert.Equal(t, 3.0, median(xs))
	assert.Equal(t, []float64{5, 1, 3}, xs, "median must not reorder its input")
	assert.Equal(t, 2.5, median([]float64{4, 1, 2, 3}))
	assert.Equal(t, 7.0, median([]float64{7}))
	assert.Equal(t, 0.0, median(nil))
}

func TestParseInfoCPU(t *testing.T) {
	// testdata/info-cpu.txt: redis-server 7.0's INFO cpu, CRLF line ends as sent.
	d, err := parseInfoCPU(readTestdata(t, "info-cpu.txt"))
	require.NoError(t, err)
	assert.Equal(t, time.Duration((0.009879+0.004939)*float64(time.Second)), d)
	_, err = parseInfoCPU("# CPU\r\nused_cpu_sys:0.5\r\n")
	assert.Error(t, err, "used_cpu_user missing")
	_, err = parseInfoCPU("used_cpu_sys:x\r\nused_cpu_user:1\r\n")
	assert.Error(t, err)
}

func TestParseProcStat(t *testing.T) {
	// testdata/proc-stat.txt: a shell after a busy loop, utime 44 ticks, stime 0.
	d, err := parseProcStat(readTestdata(t, "proc-stat.txt"))
	require.NoError(t, err)
	assert.Equal(t, 440*time.Millisecond, d)
	// comm may hold spaces and parentheses: fields count from the last ')'.
	line := "42 (a) b (c) S 1 1 1 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 100 0 0"
	d, err = parseProcStat(line)
	require.NoError(t, err)
	assert.Equal(t, 100*time.Millisecond, d)
	_, err = parseProcStat("42 (x) S 1 2")
	assert.Error(t, err)
	_, err = parseProcStat("garbage")
	assert.Error(t, err)
}

// runAt is a measured run of row in round at perSec req/s over 5 s, with
// redisUs and serverUs µs of CPU per request.
func runAt(row string, round int, perSec, redisUs, serverUs float64) run {
	n := int64(perSec * 5)
	return run{Row: row, Round: round, Duration: 5 * time.Second,
		wrkResult: wrkResult{Requests: n, PerSec: perSec},
		RedisCPU:  time.Duration(redisUs * float64(n) * float64(time.Microsecond)),
		ServerCPU: time.Duration(serverUs * float64(n) * float64(time.Microsecond))}
}

func TestSummarizeAndBudgets(t *testing.T) {
	runs := []run{
		runAt(rowBare, 1, 1000, 0, 10), runAt(rowEnter, 1, 620, 4, 20), runAt(rowStatus, 1, 700, 1, 15), runAt(rowComplete, 1, 320, 9, 40),
		runAt(rowBare, 2, 2000, 0, 10), runAt(rowEnter, 2, 1100, 4, 22), runAt(rowStatus, 2, 1400, 1, 15), runAt(rowComplete, 2, 700, 8, 40),
		runAt(rowBare, 3, 1000, 0, 10), runAt(rowEnter, 3, 650, 5, 21), runAt(rowStatus, 3, 800, 2, 15), runAt(rowComplete, 3, 300, 9, 40),
	}
	// bare + PING: the PING limit of enter and status (1000, 1600, 900 req/s).
	runs = append(runs, runAt(rowPing, 1, 1000, 12, 30), runAt(rowPing, 2, 1600, 11, 31), runAt(rowPing, 3, 900, 13, 29),
		runAt(rowStatusSnap, 1, 900, 0.5, 12), runAt(rowStatusSnap, 2, 1700, 0.4, 12), runAt(rowStatusSnap, 3, 700, 0.5, 12))
	// The batched limits: bare + batched PING (800, 1500, 700 req/s) for
	// every row that needs Redis, bare + batched enter writes (500, 1000,
	// 600) for enter.
	runs = append(runs, runAt(rowBatchPing, 1, 800, 2, 14), runAt(rowBatchPing, 2, 1500, 2, 14), runAt(rowBatchPing, 3, 700, 2, 14),
		runAt(rowBatchEnter, 1, 500, 9, 16), runAt(rowBatchEnter, 2, 1000, 8, 16), runAt(rowBatchEnter, 3, 600, 9, 16))
	// A failed run is left out of the medians and counted.
	bad := runAt(rowStatus, 3, 5000, 1, 1)
	bad.Non2xx = bad.Requests
	runs = append(runs, bad)
	sums := summarize([]string{rowBare, rowPing, rowBatchPing, rowBatchEnter, rowEnter, rowStatus, rowStatusSnap, rowComplete}, runs)
	byRow := map[string]summary{}
	for _, s := range sums {
		byRow[s.Row] = s
	}
	e := byRow[rowEnter]
	// % of the same round's bare: 62, 55, 65.
	assert.InDelta(t, 62, e.Pct, 1e-9)
	assert.InDelta(t, 55, e.PctMin, 1e-9)
	assert.InDelta(t, 65, e.PctMax, 1e-9)
	assert.InDelta(t, 650, e.PerSec, 1e-9)
	assert.InDelta(t, 4, e.RedisUs, 1e-6)
	assert.InDelta(t, 21, e.ServerUs, 1e-6)
	assert.True(t, e.HasBudget)
	assert.True(t, e.BudgetOK, "62 %% ≥ 60 %%")
	s := byRow[rowStatus]
	assert.Equal(t, 4, s.Runs)
	assert.Equal(t, 1, s.Failed)
	assert.InDelta(t, 70, s.Pct, 1e-9) // 70, 70, 80
	assert.False(t, s.BudgetOK, "70 %% < 75 %%")
	// % of the PING limit: enter 62, 68.75, 72.2…; status 70, 87.5, (failed run left out) 88.9….
	assert.True(t, e.HasPing)
	assert.InDelta(t, 68.75, e.PingPct, 1e-9)
	assert.InDelta(t, 62, e.PingPctMin, 1e-9)
	assert.InDelta(t, 650.0/9, e.PingPctMax, 1e-9)
	assert.True(t, s.HasPing)
	assert.InDelta(t, 87.5, s.PingPct, 1e-9)
	// status (snapshot): its own status budget (90, 85, 70: 85 ≥ 75) and
	// ratio to the PING limit (90, 106.25, 77.8…).
	ss := byRow[rowStatusSnap]
	assert.True(t, ss.HasBudget)
	assert.InDelta(t, 85, ss.Pct, 1e-9)
	assert.True(t, ss.BudgetOK, "85 %% ≥ 75 %%")
	assert.InDelta(t, 90, ss.PingPct, 1e-9)
	p := byRow[rowPing]
	assert.InDelta(t, 90, p.Pct, 1e-9) // 100, 80, 90 % of bare
	assert.InDelta(t, 12, p.RedisUs, 1e-6)
	assert.InDelta(t, 30, p.ServerUs, 1e-6)
	assert.False(t, p.HasBudget)
	assert.False(t, p.HasPing, "the limit has no % of itself")
	assert.False(t, byRow[rowComplete].HasPing, "complete is not compared with the PING limit")
	// % of the batched limit: enter 77.5, 73.3…, 92.9…; status 87.5,
	// 93.3…, (failed run left out) 114.3…; complete 40, 46.7…, 42.9….
	assert.True(t, e.HasBatch)
	assert.InDelta(t, 77.5, e.BatchPct, 1e-9)
	assert.InDelta(t, 1100.0/15, e.BatchPctMin, 1e-9)
	assert.InDelta(t, 650.0/7, e.BatchPctMax, 1e-9)
	assert.InDelta(t, 1400.0/15, s.BatchPct, 1e-9)
	assert.InDelta(t, 300.0/7, byRow[rowComplete].BatchPct, 1e-9)
	// % of the batched enter writes: enter only, 124, 110, 108.3….
	assert.True(t, e.HasWrites)
	assert.InDelta(t, 110, e.WritesPct, 1e-9)
	assert.InDelta(t, 650.0/6, e.WritesPctMin, 1e-9)
	assert.InDelta(t, 124, e.WritesPctMax, 1e-9)
	assert.False(t, s.HasWrites, "status is not compared with the enter writes")
	for _, r := range []string{rowBare, rowPing, rowBatchPing, rowBatchEnter} {
		assert.False(t, byRow[r].HasBatch || byRow[r].HasWrites || byRow[r].HasBudget, "a limit row has no limit: %s", r)
	}
	bp := byRow[rowBatchPing]
	assert.InDelta(t, 75, bp.Pct, 1e-9) // 80, 75, 70 % of bare
	assert.InDelta(t, 2, bp.RedisUs, 1e-6)
	c := byRow[rowComplete]
	assert.InDelta(t, 32, c.Pct, 1e-9) // 32, 35, 30
	assert.True(t, c.BudgetOK)
	assert.False(t, byRow[rowBare].HasBudget)

	ratio, ok := redisRatio(sums)
	assert.InDelta(t, 9.0/4.0, ratio, 1e-6)
	assert.False(t, ok, "2.25× > 2×")

	var out strings.Builder
	printTable(&out, sums)
	table := out.String()
	assert.Contains(t, table, "≥ 60 % PASS")
	assert.Contains(t, table, "≥ 75 % OVER (1 of 4 runs FAILED)")
	assert.Contains(t, table, "≥ 75 % PASS", "the status budget on the snapshot row too")
	assert.Contains(t, table, "% of the PING limit")
	assert.Contains(t, table, "69 % (62–72 %)", "enter's % of the PING limit")
	assert.Contains(t, table, "88 % (70–89 %)", "status's % of the PING limit")
	for _, l := range strings.Split(table, "\n") {
		if strings.HasPrefix(l, "| "+rowPing+" ") {
			assert.Contains(t, l, "| 12.00 ", "bare + PING shows its Redis µs/req")
			assert.Contains(t, l, "90 % (80–100 %)")
		}
		if strings.HasPrefix(l, "| "+rowBare+" ") {
			assert.Equal(t, 0, strings.Count(l, "%)"), "no percentage on %q", l)
			assert.Contains(t, l, "| 0.00 ", "bare /hello shows its Redis µs/req too (the idle floor)")
		}
		if strings.HasPrefix(l, "| "+rowComplete+" ") {
			assert.Equal(t, 2, strings.Count(l, "%)"), "%% of bare and of the batched limit, no %% of the PING limit on %q", l)
			assert.Contains(t, l, "43 % (40–47 %)")
		}
		if strings.HasPrefix(l, "| "+rowEnter+" ") {
			assert.Equal(t, 4, strings.Count(l, "%)"), "bare, PING, batched, enter writes on %q", l)
			b, w := strings.Index(l, "| 78 % (73–93 %) "), strings.Index(l, "| 110 % (108–124 %) ")
			assert.True(t, b > 0 && w > b, "the batched limit, then the enter writes: %q", l)
		}
		if strings.HasPrefix(l, "| "+rowBatchEnter+" ") {
			assert.Contains(t, l, "| 9.00 ", "the limit rows show their Redis µs/req")
			assert.Equal(t, 1, strings.Count(l, "%)"), "%% of bare only on %q", l)
		}
	}
	assert.Contains(t, table, "% of the batched limit (median, min–max)")
	assert.Contains(t, table, "% of the batched enter writes (median, min–max)")
	// The legend: every row of the table once, with its description.
	_, legend, ok := strings.Cut(table, "\nrows:")
	require.True(t, ok, "a legend under the table")
	for _, s := range sums {
		assert.Equal(t, 1, strings.Count(legend, fmt.Sprintf("\n  %-28s %s\n", s.Row, rowLegend[s.Row])), s.Row)
	}
	assert.Contains(t, legend, "columns:")
	assert.Contains(t, table, "62 % (55–65 %)")
	assert.Contains(t, table, "Redis CPU per completion / per enter: 2.25× (budget ≤ 2×) OVER")
	for _, l := range strings.Split(strings.TrimSpace(table), "\n")[:10] {
		assert.True(t, strings.HasPrefix(l, "|") && strings.HasSuffix(l, "|"), "a Markdown table row: %q", l)
	}
}

// TestNoBareNoPercentage: a round whose bare run failed gives its other
// rows no percentage, and a row without percentages does not pass its budget.
func TestNoBareNoPercentage(t *testing.T) {
	bare := runAt(rowBare, 1, 1000, 0, 10)
	bare.Err = os.ErrNotExist
	sums := summarize([]string{rowEnter}, []run{bare, runAt(rowEnter, 1, 900, 4, 20)})
	assert.Equal(t, 0.0, sums[0].Pct)
	assert.False(t, sums[0].BudgetOK)
	// Likewise a failed bare + PING run: no % of the PING limit that round.
	ping := runAt(rowPing, 1, 1000, 10, 30)
	ping.Non2xx = ping.Requests
	sums = summarize([]string{rowEnter}, []run{runAt(rowBare, 1, 1000, 0, 10), ping, runAt(rowEnter, 1, 900, 4, 20)})
	assert.InDelta(t, 90, sums[0].Pct, 1e-9)
	assert.False(t, sums[0].HasPing)
	// And a failed batched limit run: no % of it that round, the other
	// limit still counts.
	batch := runAt(rowBatchPing, 1, 800, 2, 14)
	batch.Err = os.ErrNotExist
	sums = summarize([]string{rowEnter}, []run{runAt(rowBare, 1, 1000, 0, 10), batch, runAt(rowBatchEnter, 1, 600, 9, 16),
		runAt(rowEnter, 1, 450, 4, 20)})
	assert.False(t, sums[0].HasBatch)
	assert.True(t, sums[0].HasWrites)
	assert.InDelta(t, 75, sums[0].WritesPct, 1e-9)
}

func TestRows(t *testing.T) {
	names := func(o options) []string {
		var ns []string
		for _, r := range o.rows() {
			ns = append(ns, r.name)
		}
		return ns
	}
	limits := []string{rowBare, rowPing, rowBatchPing, rowBatchEnter} // always, first
	assert.Equal(t, append(limits, rowEnter, rowEnterOff, rowStatus, rowStatusSnap, rowExchange, rowExchangeOff, rowComplete, rowCompleteOff, rowJWKS),
		names(options{journal: "both", kinds: allKinds}))
	assert.Equal(t, append(limits, rowEnter, rowStatus, rowStatusSnap, rowExchange, rowComplete, rowJWKS), names(options{journal: "on", kinds: allKinds}))
	assert.Equal(t, append(limits, rowEnterOff, rowStatus), names(options{journal: "off", kinds: "enter,status"}))
	assert.Equal(t, append(limits, rowStatusSnap), names(options{journal: "both", kinds: "status-snapshot"}))
	var profiled []string
	for _, r := range (options{journal: "both", kinds: allKinds}).rows() {
		assert.Equal(t, strings.Contains(r.name, "journal off"), r.journal == "off", r.name)
		assert.Equal(t, r.name == rowBare || r.name == rowPing || r.name == rowBatchPing || r.name == rowBatchEnter, r.hello, r.name)
		assert.NotEmpty(t, rowLegend[r.name], "every row has a legend line: %s", r.name)
		assert.Equal(t, r.name == rowStatusSnap, r.snapshot != "", r.name)
		if r.profiled() {
			profiled = append(profiled, r.kind)
		}
	}
	assert.Equal(t, []string{"enter", "status", "status-snapshot", "exchange", "complete", "jwks"}, profiled,
		"-profile: every flashgate row kind of a round once, named by kind")
}

// TestServeEnv: the status (snapshot) row's server gets
// FLASHGATE_STATUS_SNAPSHOT in the format cmd/flashgate's config parses (a
// Go duration), the others leave the default (exact statuses); the journal
// bound likewise.
func TestServeEnv(t *testing.T) {
	b := &bencher{o: options{redisURL: "redis://x"}}
	env := func(spec rowSpec) map[string]string {
		m := map[string]string{}
		for _, kv := range b.serveEnv("127.0.0.1:1", "127.0.0.1:2", spec) {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
		return m
	}
	for _, r := range (options{journal: "both", kinds: allKinds}).rows() {
		if r.hello {
			continue
		}
		e := env(r)
		snap, ok := e["FLASHGATE_STATUS_SNAPSHOT"]
		assert.Equal(t, r.name == rowStatusSnap, ok, r.name)
		if ok {
			d, err := time.ParseDuration(snap)
			require.NoError(t, err)
			assert.Equal(t, 500*time.Millisecond, d)
		}
		_, off := e["FLASHGATE_JOURNAL_MAXLEN"]
		assert.Equal(t, r.journal == "off", off, r.name)
		assert.Equal(t, "redis://x", e["REDIS_URL"])
	}
}

func TestCompleteTokens(t *testing.T) {
	b := &bencher{o: options{duration: 5 * time.Second, completeMin: 1000, completeMax: 50000}}
	on := rowSpec{name: rowComplete, kind: "complete"}
	off := rowSpec{name: rowCompleteOff, kind: "complete", journal: "off"}
	assert.Equal(t, 1000, b.completeTokens(on, nil), "no estimate: the floor")
	prev := []run{runAt(rowExchange, 1, 2000, 1, 1), runAt(rowExchangeOff, 1, 3000, 1, 1)}
	assert.Equal(t, 20000, b.completeTokens(on, prev), "2 × the exchange rate × 5 s")
	assert.Equal(t, 30000, b.completeTokens(off, prev), "the exchange row of the same journal setting")
	prev = append(prev, runAt(rowComplete, 1, 2400, 1, 1), runAt(rowExchange, 2, 1000, 1, 1))
	assert.Equal(t, 24000, b.completeTokens(on, prev), "the fastest earlier run")
	failed := runAt(rowComplete, 2, 4000, 1, 1)
	failed.Non2xx = failed.Requests
	assert.Equal(t, 24000, b.completeTokens(on, append(prev, failed)), "failed runs give no estimate")
	prev = append(prev, runAt(rowCompleteOff, 1, 100000, 1, 1))
	assert.Equal(t, 50000, b.completeTokens(off, prev), "capped")
}

func TestValidate(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "flashgate")
	require.NoError(t, os.WriteFile(bin, nil, 0o755))
	ok := options{bin: bin, redisURL: "redis://x", rounds: 1, duration: time.Second, threads: 2, conns: 64, journal: "both",
		statusUsers: 10, exchangeUsers: 10, completeMin: 10, completeMax: 10, kinds: "enter,jwks"}
	o := ok
	require.NoError(t, o.validate())
	o.kinds = allKinds
	require.NoError(t, o.validate())
	for name, f := range map[string]func(*options){
		"no redis": func(o *options) { o.redisURL = "" }, "no binary": func(o *options) { o.bin += "-missing" },
		"journal": func(o *options) { o.journal = "maybe" }, "rows": func(o *options) { o.kinds = "enter,checkout" },
		"duration": func(o *options) { o.duration = time.Millisecond }, "conns": func(o *options) { o.conns = 1 },
		"ping is not selectable": func(o *options) { o.kinds = "ping" }, "hello neither": func(o *options) { o.kinds = "hello" },
	} {
		o := ok
		f(&o)
		assert.Error(t, o.validate(), name)
	}
}

// TestHelloPing: the bare server's GET /ping sends exactly one PING to Redis
// per request (INFO commandstats of a private redis-server) and answers the
// same JSON as GET /hello; with Redis gone it answers 503, which wrk counts.
func TestHelloPing(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	app := helloApp(rdb)
	get := func(path string) (int, string) {
		resp, err := app.Test(httptest.NewRequest("GET", path, nil), -1)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	pings := func() string {
		info, err := rdb.Info(context.Background(), "commandstats").Result()
		require.NoError(t, err)
		for _, l := range strings.Split(info, "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(l), ":"); ok && k == "cmdstat_ping" {
				calls, _, _ := strings.Cut(v, ",")
				return calls
			}
		}
		return "calls=0"
	}
	code, hello := get("/hello")
	require.Equal(t, 200, code)
	assert.JSONEq(t, `{"room":"r","state":"WAITING","position":42}`, hello)
	require.NoError(t, rdb.ConfigResetStat(context.Background()).Err())
	for range 3 {
		code, body := get("/ping")
		require.Equal(t, 200, code)
		assert.Equal(t, hello, body)
	}
	// The INFO call itself is not a PING: 3 requests, 3 PINGs.
	assert.Equal(t, "calls=3", pings())
	srv.Kill()
	code, _ = get("/ping")
	assert.Equal(t, 503, code)
}

func TestServerStats(t *testing.T) {
	expo := func(calls, items, waits float64) string {
		return fmt.Sprintf(`# HELP flashgate_script_batch_calls_total x
# TYPE flashgate_script_batch_calls_total counter
flashgate_script_batch_calls_total{op="complete"} %g
flashgate_script_batch_calls_total{op="enter"} 7
flashgate_script_batch_items_total{op="complete"} %g
flashgate_redis_pool_connections{state="idle"} 1
flashgate_redis_pool_connections{state="total"} 6
flashgate_redis_pool_waits_total %g
flashgate_redis_pool_timeouts_total 0
`, calls, items, waits)
	}
	before, err := parseStats(strings.NewReader(expo(10, 10, 2)))
	require.NoError(t, err)
	after, err := parseStats(strings.NewReader(expo(110, 410, 5)))
	require.NoError(t, err)
	rs := diffStats(before, after, "complete")
	require.Equal(t, runStats{Batch: 4, Conns: 6, Waits: 3, Timeouts: 0, ok: true}, rs)
	require.Equal(t, "  pool 6 conns, 3 waits, 0 timeouts; 4.0 items/call", rs.String())
	require.Equal(t, 0.0, diffStats(before, after, "status").Batch, "no calls of the op: no batch")
	require.Empty(t, runStats{}.String(), "no stats read: nothing printed")
}

// TestHelloBatched: POST /batched and /batched-enter answer every
// concurrent request 200 with GET /hello's JSON; requests that arrive while
// a batch is in flight share the next call (the first call held until 20
// more have queued: two calls for 21 requests, Redis seeing one PING or one
// script run per call); the batched-enter script leaves exactly the distinct
// users in the line with arrival numbers 1…n, the counter at n and n journal
// entries with journal_entry's fields; a request without X-User-ID is a 400;
// with Redis gone both answer 503.
func TestHelloBatched(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	app, bs := helloRoutes(rdb)
	post := func(path, user string) (int, string) {
		req := httptest.NewRequest("POST", path, nil)
		if user != "" {
			req.Header.Set("X-User-ID", user)
		}
		resp, err := app.Test(req, -1)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	calls := func(cmd string) int {
		info, err := rdb.Info(ctx, "commandstats").Result()
		require.NoError(t, err)
		for _, l := range strings.Split(info, "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(l), ":"); ok && k == "cmdstat_"+cmd {
				var n int
				_, err := fmt.Sscanf(v, "calls=%d", &n)
				require.NoError(t, err)
				return n
			}
		}
		return 0
	}
	const n = 21
	for _, tc := range []struct {
		path, cmd string
		g         *groupCommit
	}{{"/batched", "ping", bs.ping}, {"/batched-enter", "evalsha", bs.enter}} {
		t.Run(tc.path, func(t *testing.T) {
			bf := newBlockFirst()
			tc.g.send = bf.wrap(tc.g.send)
			require.NoError(t, batchedEnterScript.Load(ctx, rdb).Err())
			require.NoError(t, rdb.ConfigResetStat(ctx).Err())
			codes, bodies := make([]int, n), make([]string, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() { defer wg.Done(); codes[i], bodies[i] = post(tc.path, fmt.Sprintf("user-%d", i)) }()
				if i == 0 {
					<-bf.entered
				}
			}
			waitQueued(tc.g, n-1)
			close(bf.release)
			wg.Wait()
			for i := range n {
				assert.Equal(t, 200, codes[i])
				assert.JSONEq(t, `{"room":"r","state":"WAITING","position":42}`, bodies[i])
			}
			require.Len(t, bf.batches, 2, "one call for the first request, one for the 20 that queued meanwhile")
			assert.Len(t, bf.batches[1], n-1)
			assert.EqualValues(t, 2, tc.g.calls.Load())
			// One Redis call per batch (the script loaded beforehand: no
			// NOSCRIPT retry as EVAL).
			assert.Equal(t, 2, calls(tc.cmd))
			assert.Equal(t, 0, calls("eval"))
		})
	}

	// The batched-enter script's writes: distinct users, numbers 1…n in
	// batch order (user-0 alone first), one journal entry per batch holding
	// its n events.
	line, err := rdb.ZRangeWithScores(ctx, benchEnterKeys[1], 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, line, n)
	users := map[string]bool{}
	for i, z := range line {
		assert.Equal(t, float64(i+1), z.Score, "arrival numbers 1…n without gaps")
		users[z.Member.(string)] = true
	}
	assert.Len(t, users, n)
	for i := range n {
		assert.True(t, users[fmt.Sprintf("user-%d", i)], "user-%d in the line", i)
	}
	assert.Equal(t, "user-0", line[0].Member, "the first batch's user is number 1")
	seq, err := rdb.Get(ctx, benchEnterKeys[0]).Int()
	require.NoError(t, err)
	assert.Equal(t, n, seq)
	journal, err := rdb.XRange(ctx, benchEnterKeys[2], "-", "+").Result()
	require.NoError(t, err)
	require.Len(t, journal, 2, "one XADD per batch")
	var events []string
	for _, e := range journal {
		assert.Equal(t, map[string]any{"kind": "batch", "epoch": "bench", "events": e.Values["events"]}, e.Values,
			"journal_flush's fields: kind epoch events")
		lines := strings.Split(e.Values["events"].(string), "\n")
		assert.LessOrEqual(t, len(lines), 256, "at most 256 events per entry, as journal_flush")
		events = append(events, lines...)
	}
	require.Len(t, events, n)
	for i, ev := range events {
		f := strings.Split(ev, ",")
		require.Len(t, f, 8, "journal_entry's fields after epoch: kind seq user lane at admission reason eta")
		assert.Equal(t, []string{"entered", fmt.Sprint(i + 1), "public", "", "", ""}, []string{f[0], f[1], f[3], f[5], f[6], f[7]})
		assert.NotEmpty(t, f[4], "at")
	}
	assert.Equal(t, "user-0", strings.Split(events[0], ",")[2])

	code, _ := post("/batched-enter", "")
	assert.Equal(t, 400, code, "no X-User-ID")
	srv.Kill()
	for _, path := range []string{"/batched", "/batched-enter"} {
		code, _ := post(path, "late")
		assert.Equal(t, 503, code, path)
	}
}
