package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// serverStats are the flashgate serve counters read from its /metrics
// around a run (issuer coalescing and the go-redis pool): what the run did
// is the difference of two reads, except conns, a gauge read at the end.
type serverStats struct {
	// calls and items: flashgate_script_batch_{calls,items}_total by op.
	calls, items map[string]float64
	// conns: flashgate_redis_pool_connections{state="total"}; waits:
	// flashgate_redis_pool_waits_total (requests that waited for a pool
	// connection); timeouts: flashgate_redis_pool_timeouts_total.
	conns, waits, timeouts float64
}

// scrapeStats reads base/metrics. Errors: the request's, a non-200 answer.
func scrapeStats(base string) (serverStats, error) {
	cl := http.Client{Timeout: 5 * time.Second}
	res, err := cl.Get(base + "/metrics")
	if err != nil {
		return serverStats{}, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return serverStats{}, fmt.Errorf("GET /metrics: %s", res.Status)
	}
	return parseStats(res.Body)
}

// parseStats reads the serverStats series of a Prometheus text exposition.
func parseStats(r io.Reader) (serverStats, error) {
	s := serverStats{calls: map[string]float64{}, items: map[string]float64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		op := ""
		if i := strings.Index(name, `{op="`); i >= 0 {
			op = strings.TrimSuffix(name[i+5:], `"}`)
			name = name[:i]
		}
		switch name {
		case "flashgate_script_batch_calls_total":
			s.calls[op] = v
		case "flashgate_script_batch_items_total":
			s.items[op] = v
		case `flashgate_redis_pool_connections{state="total"}`:
			s.conns = v
		case "flashgate_redis_pool_waits_total":
			s.waits = v
		case "flashgate_redis_pool_timeouts_total":
			s.timeouts = v
		}
	}
	return s, sc.Err()
}

// runStats is what one run did by the server's counters: the mean items
// per script call of the row's operation (0: no call, or an older binary
// without the series), the pool's connections at the end and its waits
// and timeouts during the run.
type runStats struct {
	Batch                  float64
	Conns, Waits, Timeouts float64
	ok                     bool
}

// diffStats is after − before for op ("" for none).
func diffStats(before, after serverStats, op string) runStats {
	rs := runStats{Conns: after.conns, Waits: after.waits - before.waits, Timeouts: after.timeouts - before.timeouts, ok: true}
	if c := after.calls[op] - before.calls[op]; op != "" && c > 0 {
		rs.Batch = (after.items[op] - before.items[op]) / c
	}
	return rs
}

// String is the per-round listing's addition.
func (rs runStats) String() string {
	if !rs.ok {
		return ""
	}
	s := fmt.Sprintf("  pool %.0f conns, %.0f waits, %.0f timeouts", rs.Conns, rs.Waits, rs.Timeouts)
	if rs.Batch > 0 {
		s += fmt.Sprintf("; %.1f items/call", rs.Batch)
	}
	return s
}
