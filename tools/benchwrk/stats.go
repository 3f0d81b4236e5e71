package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// run is one measured wrk run of one row.
type run struct {
	Row   string
	Round int
	wrkResult
	// RedisCPU and ServerCPU are the CPU time (user + system) Redis and the
	// server process used during the run; WrkCPU wrk's own.
	RedisCPU, ServerCPU, WrkCPU time.Duration
	// Duration is the wrk -d of the run.
	Duration time.Duration
	// Err is set when the run could not be measured at all.
	Err error
	// Stats: the server's coalescing and pool counters over the run
	// (flashgate serve rows whose binary exports them).
	Stats runStats
}

// batchOp is the coalesced operation (flashgate_script_batch_*{op}) of
// each row kind.
var batchOp = map[string]string{"enter": "enter", "status": "status", "status-snapshot": "status",
	"exchange": "exchange", "complete": "complete"}

// perReq is d ÷ the run's requests, in µs (0 without requests).
func (r run) perReq(d time.Duration) float64 {
	if r.Requests == 0 {
		return 0
	}
	return float64(d) / float64(time.Microsecond) / float64(r.Requests)
}

// ok reports whether the run measured and its error share is within
// maxFailedShare.
func (r run) ok() bool { return r.Err == nil && !r.failed() }

// String is the run's line in the per-round listing.
func (r run) String() string {
	if r.Err != nil {
		return fmt.Sprintf("round %d  %-27s FAILED: %v", r.Round, r.Row, r.Err)
	}
	s := fmt.Sprintf("round %d  %-27s %9.0f req/s  %8d requests  Redis %6.2f µs/req  server %6.2f µs/req  wrk %3.0f %% of a core",
		r.Round, r.Row, r.PerSec, r.Requests, r.perReq(r.RedisCPU), r.perReq(r.ServerCPU),
		100*float64(r.WrkCPU)/float64(max(r.Duration, 1)))
	if r.Non2xx+r.SocketErrors > 0 {
		s += fmt.Sprintf("  non-2xx %d, socket errors %d", r.Non2xx, r.SocketErrors)
	}
	if r.failed() {
		s += "  FAILED (more than 0.1 % non-2xx or socket errors)"
	}
	if r.ThreadsOut > 0 {
		s += fmt.Sprintf("  (%d threads ran out of tokens: req/s is a lower bound)", r.ThreadsOut)
	}
	return s + r.Stats.String()
}

// median is the median of xs (the mean of the middle two for an even
// count); 0 for none. xs is not modified.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// budget is a lower bound on a row's median % of the bare handler (issue
// 13, "Budgets": enter ≥ 60 %, status ≥ 75 %, /v1/complete ≥ 30 %; the
// status budget holds for the exact default and the snapshot opt-in alike).
type budget struct {
	Row    string
	MinPct float64
}

var budgets = []budget{{rowEnter, 60}, {rowStatus, 75}, {rowStatusSnap, 75}, {rowComplete, 30}}

// pingLimited are the rows whose % of the same round's bare + PING the
// table shows: enter and status, each of which needs at least one Redis
// round trip per request (the snapshot row's far-behind statuses do not:
// it may exceed 100 %).
var pingLimited = map[string]bool{rowEnter: true, rowEnterOff: true, rowStatus: true, rowStatusSnap: true}

// batchLimited are the rows whose % of the same round's bare + batched PING
// the table shows: every flashgate row that needs Redis, each of which
// flashgate batches (enter, status, exchange, complete) or may (the
// snapshot row's near-head statuses; its far-behind ones need no Redis: it
// may exceed 100 %). jwks needs no Redis.
var batchLimited = map[string]bool{rowEnter: true, rowEnterOff: true, rowStatus: true, rowStatusSnap: true,
	rowExchange: true, rowExchangeOff: true, rowComplete: true, rowCompleteOff: true}

// enterWritesLimited are the rows whose % of the same round's bare + batched
// enter writes the table shows: enter with the journal on (the limit writes
// a journal entry per user; the journal-off enter writes none).
var enterWritesLimited = map[string]bool{rowEnter: true}

// rowLegend is each row's one-line description, printed under the table.
var rowLegend = map[string]string{
	rowBare:        "bare fiber GET /hello (c.JSON of a small object): every % of bare divides by it",
	rowPing:        "bare + one Redis PING per request (GET /ping): the limit of one unbatched round trip per request",
	rowBatchPing:   "bare + one Redis PING per batch of concurrent requests (POST /batched, leader-handoff group commit as flashgate's): the limit of a batched request",
	rowBatchEnter:  "bare + per batch one script with the least an enter writes (INCRBY, one ZADD, one journal XADD per 256 users, as journal_flush; POST /batched-enter): the limit of enter",
	rowEnter:       "POST /v1/rooms/{room}/enter, a new user per request, paused room",
	rowEnterOff:    "enter, the server with FLASHGATE_JOURNAL_MAXLEN=off (no journal)",
	rowStatus:      "GET /v1/rooms/{room}/status of users waiting in a paused room (exact statuses)",
	rowStatusSnap:  "status, the server with FLASHGATE_STATUS_SNAPSHOT=" + statusSnapshot + " (users far behind the head answered from the snapshot)",
	rowExchange:    "POST /v1/rooms/{room}/exchange of ACTIVE users (a repeat re-mints)",
	rowExchangeOff: "exchange, no journal",
	rowComplete:    "POST /v1/complete, a distinct admission token per request",
	rowCompleteOff: "complete, no journal",
	rowJWKS:        "GET /.well-known/jwks.json (no Redis)",
}

// redisCompleteFactor is issue 13's budget "Redis CPU per completion ≤ 2×
// per enter".
const redisCompleteFactor = 2

// verdict is "PASS" when ok, else "OVER" (over budget: the benchmark
// reports, it does not fail).
func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "OVER"
}

// summary is one row of the table: medians over the rounds of its runs
// that did not fail.
type summary struct {
	Row                 string
	Runs, Failed        int
	LowerBounds         int     // runs whose wrk threads ran out of tokens
	PerSec              float64 // median req/s
	Pct, PctMin, PctMax float64 // % of the same round's bare req/s
	// PingPct… are the % of the same round's bare + PING req/s (rows in
	// pingLimited only; HasPing: at least one round had both).
	HasPing                         bool
	PingPct, PingPctMin, PingPctMax float64
	// BatchPct… are the % of the same round's bare + batched PING (rows
	// in batchLimited), WritesPct… of its bare + batched enter writes
	// (rows in enterWritesLimited); Has…: at least one round had both.
	HasBatch                              bool
	BatchPct, BatchPctMin, BatchPctMax    float64
	HasWrites                             bool
	WritesPct, WritesPctMin, WritesPctMax float64
	RedisUs, ServerUs                     float64 // medians, µs per request
	HasBudget                             bool
	Budget                                float64
	BudgetOK                              bool
}

// summarize computes each row's summary (in rows' order) from runs, the
// percentages against the bare row's run of the same round, for the
// pingLimited rows against the bare + PING row's, for the batchLimited rows
// against the bare + batched PING row's and for the enterWritesLimited rows
// against the bare + batched enter writes row's (a round whose limit run
// failed gives no such percentage).
func summarize(rows []string, runs []run) []summary {
	bare, ping, batch, writes := map[int]float64{}, map[int]float64{}, map[int]float64{}, map[int]float64{}
	for _, r := range runs {
		if !r.ok() {
			continue
		}
		switch r.Row {
		case rowBare:
			bare[r.Round] = r.PerSec
		case rowPing:
			ping[r.Round] = r.PerSec
		case rowBatchPing:
			batch[r.Round] = r.PerSec
		case rowBatchEnter:
			writes[r.Round] = r.PerSec
		}
	}
	var out []summary
	for _, row := range rows {
		s := summary{Row: row}
		var ps, pct, ppct, bpct, wpct, red, srv []float64
		for _, r := range runs {
			if r.Row != row {
				continue
			}
			s.Runs++
			if !r.ok() {
				s.Failed++
				continue
			}
			if r.ThreadsOut > 0 {
				s.LowerBounds++
			}
			ps = append(ps, r.PerSec)
			red = append(red, r.perReq(r.RedisCPU))
			srv = append(srv, r.perReq(r.ServerCPU))
			if b := bare[r.Round]; b > 0 {
				pct = append(pct, 100*r.PerSec/b)
			}
			if p := ping[r.Round]; p > 0 && pingLimited[row] {
				ppct = append(ppct, 100*r.PerSec/p)
			}
			if p := batch[r.Round]; p > 0 && batchLimited[row] {
				bpct = append(bpct, 100*r.PerSec/p)
			}
			if p := writes[r.Round]; p > 0 && enterWritesLimited[row] {
				wpct = append(wpct, 100*r.PerSec/p)
			}
		}
		s.PerSec, s.RedisUs, s.ServerUs = median(ps), median(red), median(srv)
		if len(pct) > 0 {
			s.Pct, s.PctMin, s.PctMax = median(pct), slices.Min(pct), slices.Max(pct)
		}
		if len(ppct) > 0 {
			s.HasPing, s.PingPct, s.PingPctMin, s.PingPctMax = true, median(ppct), slices.Min(ppct), slices.Max(ppct)
		}
		if len(bpct) > 0 {
			s.HasBatch, s.BatchPct, s.BatchPctMin, s.BatchPctMax = true, median(bpct), slices.Min(bpct), slices.Max(bpct)
		}
		if len(wpct) > 0 {
			s.HasWrites, s.WritesPct, s.WritesPctMin, s.WritesPctMax = true, median(wpct), slices.Min(wpct), slices.Max(wpct)
		}
		for _, b := range budgets {
			if b.Row == row {
				s.HasBudget, s.Budget, s.BudgetOK = true, b.MinPct, len(pct) > 0 && s.Pct >= b.MinPct
			}
		}
		out = append(out, s)
	}
	return out
}

// redisRatio is the median Redis µs per completion ÷ per enter (0 when
// either row has no measurement) and whether it is within
// redisCompleteFactor.
func redisRatio(sums []summary) (float64, bool) {
	var enter, complete float64
	for _, s := range sums {
		switch s.Row {
		case rowEnter:
			enter = s.RedisUs
		case rowComplete:
			complete = s.RedisUs
		}
	}
	if enter <= 0 || complete <= 0 {
		return 0, false
	}
	r := complete / enter
	return r, r <= redisCompleteFactor
}

// printTable writes the medians table (Markdown) with the budgets, the
// % of the PING limit (bare + PING) of the pingLimited rows, of the batched
// limit (bare + batched PING) of the batchLimited rows and of the batched
// enter writes of the enterWritesLimited rows, then a legend: each row's
// one-line description (rowLegend) and what the limit columns mean.
func printTable(w io.Writer, sums []summary) {
	var buf strings.Builder
	tw := tabwriter.NewWriter(&buf, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, " endpoint\t req/s\t % of bare (median, min–max)\t budget\t % of the PING limit (median, min–max)\t"+
		" % of the batched limit (median, min–max)\t % of the batched enter writes (median, min–max)\t Redis µs/req\t server µs/req\t")
	fmt.Fprintln(tw, "---\t---\t---\t---\t---\t---\t---\t---\t---\t")
	span := func(has bool, med, lo, hi float64) string {
		if !has {
			return "—"
		}
		return fmt.Sprintf("%.0f %% (%.0f–%.0f %%)", med, lo, hi)
	}
	for _, s := range sums {
		if s.Runs == s.Failed {
			fmt.Fprintf(tw, " %s\t —\t —\t %s\t —\t —\t —\t —\t —\t\n", s.Row, failedNote(s))
			continue
		}
		pct := span(s.Row != rowBare && s.Pct > 0, s.Pct, s.PctMin, s.PctMax)
		ppct := span(s.HasPing, s.PingPct, s.PingPctMin, s.PingPctMax)
		bpct := span(s.HasBatch, s.BatchPct, s.BatchPctMin, s.BatchPctMax)
		wpct := span(s.HasWrites, s.WritesPct, s.WritesPctMin, s.WritesPctMax)
		b := "—"
		if s.HasBudget {
			b = fmt.Sprintf("≥ %.0f %% %s", s.Budget, verdict(s.BudgetOK))
		}
		if s.Failed > 0 {
			b += " " + failedNote(s)
		}
		if s.LowerBounds > 0 {
			b += fmt.Sprintf(" (%d runs ran out of tokens: lower bound)", s.LowerBounds)
		}
		// Redis µs/req on every row, bare /hello's too: its Redis does no work
		// for it, so it shows the floor the counters read on an idle Redis.
		fmt.Fprintf(tw, " %s\t %.0f\t %s\t %s\t %s\t %s\t %s\t %.2f\t %.2f\t\n", s.Row, s.PerSec, pct, b, ppct, bpct, wpct, s.RedisUs, s.ServerUs)
	}
	tw.Flush()
	io.WriteString(w, pipeTable(buf.String()))
	if r, ok := redisRatio(sums); r > 0 {
		fmt.Fprintf(w, "Redis CPU per completion / per enter: %.2f× (budget ≤ %d×) %s\n", r, redisCompleteFactor, verdict(ok))
	}
	io.WriteString(w, "\nrows:\n")
	for _, s := range sums {
		if d, ok := rowLegend[s.Row]; ok {
			fmt.Fprintf(w, "  %-28s %s\n", s.Row, d)
		}
	}
	io.WriteString(w, tableNotes)
}

// tableNotes explains printTable's limit columns (after the row legend).
const tableNotes = `columns: each % divides a row's req/s by the same round's limit row (median over the rounds, min–max);
  the PING limit = bare + PING (enter, status), the batched limit = bare + batched PING (every row that needs Redis:
  flashgate batches concurrent requests of a room into one script call), the batched enter writes = bare + batched
  enter writes (enter). A row that needs what its limit does cannot beat it (the snapshot row's far-behind statuses
  need no Redis): a budget (issue 13, % of bare) above the limit row's own % of bare is out of reach of any server
  with the same batching and the same Redis writes.
`

func failedNote(s summary) string {
	return fmt.Sprintf("(%d of %d runs FAILED)", s.Failed, s.Runs)
}

// pipeTable turns printTable's tabwriter.Debug "|" columns into a Markdown
// table row by row (leading and trailing pipes).
func pipeTable(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if strings.Contains(l, "|") {
			l = "|" + l
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}
