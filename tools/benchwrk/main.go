// Command benchwrk measures flashgate's hot HTTP paths from outside, the way a
// user would: wrk (Debian's, scripts/install-wrk.sh) against `flashgate serve`
// running as its own process on a real redis-server (REDIS_URL;
// scripts/with-redis.sh starts one), next to a bare fiber handler (this
// program re-executed as `benchwrk hello ADDR`) in the same rounds. Issue 13.
//
//	go run ./tools/benchwrk [-rounds 3] [-duration 5s] [-threads 2] [-connections 64] [-journal both] [-profile DIR]
//
// Each round runs, in this order, each against a freshly started process and
// a flushed Redis (the state setup and its run are never separated by a
// flush): bare GET /hello; bare + PING (GET /ping of the same bare server:
// one Redis PING, then the same JSON — the physical limit of every row that
// needs an unbatched Redis round trip); bare + batched PING (POST /batched of
// the same bare server: concurrent requests share one PING per batch through
// a leader-handoff group commit like flashgate's — the limit of every row
// flashgate batches); bare + batched enter writes (POST /batched-enter: the
// same batching, each batch one script doing the least Redis work an enter
// does — the arrival counter, one ZADD, one journal XADD per 256 users (one batch entry, as journal_flush) — the
// limit of the enter row); enter (a paused room, every request a new user);
// status (statusUsers users waiting in a paused room, wrk cycling through
// their waiting tokens); status (snapshot) (the same, the server started with
// FLASHGATE_STATUS_SNAPSHOT=500ms, the opt-in); exchange (exchangeUsers ACTIVE users, cycling: a
// repeated exchange re-mints); POST /v1/complete (a distinct admission token
// per request, minted before the run); GET /.well-known/jwks.json. With
// -journal both (the default) enter, exchange and complete also run against
// a server with FLASHGATE_JOURNAL_MAXLEN=off (journal off). -profile DIR saves
// a CPU profile of each flashgate row of the last round (journal-off rows
// excepted) as DIR/<kind>.pprof: enter, status, status-snapshot, exchange,
// complete, jwks.
//
// Per run it reports wrk's Requests/sec, the CPU time Redis (INFO cpu) and
// the server process (/proc/<pid>/stat) spent per request, in µs, and wrk's
// own CPU share; then a table of medians with issue 13's budgets, the % of
// the same round's bare + PING (enter and status), of its bare + batched
// PING (every row that needs Redis) and, for enter, of its bare + batched
// enter writes, and a legend of the rows. A run whose
// non-2xx answers and socket errors exceed 0.1 % of its requests is reported
// as FAILED. The exit status is 0 when every run measured (over budget
// included: it is a measurement), 1 when a run failed, 2 on a usage error.
package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// The rows of the table, in the order of a round.
const (
	rowBare        = "bare /hello"
	rowPing        = "bare + PING"
	rowBatchPing   = "bare + batched PING"
	rowBatchEnter  = "bare + batched enter writes"
	rowEnter       = "enter"
	rowEnterOff    = "enter (journal off)"
	rowStatus      = "status"
	rowStatusSnap  = "status (snapshot)"
	rowExchange    = "exchange"
	rowExchangeOff = "exchange (journal off)"
	rowComplete    = "complete"
	rowCompleteOff = "complete (journal off)"
	rowJWKS        = "jwks"
)

// options are the command line's.
type options struct {
	bin           string
	redisURL      string
	rounds        int
	duration      time.Duration
	threads       int
	conns         int
	journal       string
	accessLog     bool
	serverLog     string
	profile       string
	statusUsers   int
	exchangeUsers int
	completeMin   int
	completeMax   int
	kinds         string
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "hello" {
		if err := serveHello(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "benchwrk hello:", err)
			os.Exit(1)
		}
		return
	}
	o := options{}
	bin := os.Getenv("FLASHGATE_BIN")
	if bin == "" {
		bin = "build/flashgate"
	}
	flag.StringVar(&o.bin, "bin", bin, "the flashgate binary to run as `flashgate serve` (env FLASHGATE_BIN)")
	flag.IntVar(&o.rounds, "rounds", 3, "interleaved rounds; the table gives medians over them")
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "wrk -d of every run")
	flag.IntVar(&o.threads, "threads", 2, "wrk -t")
	flag.IntVar(&o.conns, "connections", 64, "wrk -c")
	flag.StringVar(&o.journal, "journal", "both", "on | off | both: the journal (FLASHGATE_JOURNAL_MAXLEN default, or off) for enter, exchange and complete")
	flag.BoolVar(&o.accessLog, "access-log", true, "FLASHGATE_ACCESS_LOG of the server (on, the default, as in production; its output is discarded unless -server-log)")
	flag.StringVar(&o.serverLog, "server-log", "", "append the server's log (access log included) to this file instead of discarding it")
	flag.StringVar(&o.profile, "profile", "", "write a CPU profile of every flashgate row of the last round (journal-off rows excepted) as DIR/<kind>.pprof (FLASHGATE_PPROF_ADDR, /debug/pprof/profile)")
	flag.IntVar(&o.statusUsers, "status-users", 10000, "users waiting in the status row's room")
	flag.IntVar(&o.exchangeUsers, "exchange-users", 5000, "ACTIVE users the exchange row cycles through")
	flag.IntVar(&o.completeMin, "complete-min", 20000, "fewest admission tokens minted for a complete run")
	flag.IntVar(&o.completeMax, "complete-max", 300000, "most admission tokens minted for a complete run")
	flag.StringVar(&o.kinds, "rows", allKinds, "comma-separated rows to run ("+allKinds+"); bare /hello, bare + PING, bare + batched PING and bare + batched enter writes always run")
	flag.Parse()
	o.redisURL = os.Getenv("REDIS_URL")
	if err := o.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "benchwrk:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := bench(ctx, o)
	stop()
	os.Exit(code)
}

// validate checks the options. Errors: REDIS_URL unset, a missing binary,
// a count or duration out of range, an unknown -journal.
func (o *options) validate() error {
	switch {
	case o.redisURL == "":
		return errors.New("REDIS_URL is not set (scripts/with-redis.sh starts a throwaway redis-server)")
	case o.rounds < 1, o.threads < 1, o.conns < o.threads, o.duration < time.Second:
		return errors.New("-rounds ≥ 1, -threads ≥ 1, -connections ≥ -threads and -duration ≥ 1s")
	case o.statusUsers < o.threads, o.exchangeUsers < o.threads, o.completeMin < o.threads, o.completeMax < o.completeMin:
		return errors.New("-status-users, -exchange-users, -complete-min must be ≥ -threads, -complete-max ≥ -complete-min")
	case o.journal != "on" && o.journal != "off" && o.journal != "both":
		return fmt.Errorf("-journal must be on, off or both, got %q", o.journal)
	}
	for _, k := range strings.Split(o.kinds, ",") {
		switch strings.TrimSpace(k) {
		case "enter", "status", kindStatusSnap, "exchange", "complete", "jwks":
		default:
			return fmt.Errorf("-rows: unknown row %q (%s)", k, allKinds)
		}
	}
	abs, err := filepath.Abs(o.bin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(abs); err != nil {
		return fmt.Errorf("flashgate binary: %w (make build, or -bin / FLASHGATE_BIN)", err)
	}
	o.bin = abs
	if o.profile != "" {
		if err := os.MkdirAll(o.profile, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// allKinds are the row kinds -rows selects from (its default: all).
const allKinds = "enter,status,status-snapshot,exchange,complete,jwks"

// kindStatusSnap is the status row against a server with the status
// snapshot on (statusSnapshot).
const kindStatusSnap = "status-snapshot"

// The row kinds of the bare server's batched routes (always run).
const (
	kindBatchPing  = "batched-ping"
	kindBatchEnter = "batched-enter"
)

// helloKinds are the row kinds the bare server (serveHello) answers.
var helloKinds = map[string]bool{"hello": true, "ping": true, kindBatchPing: true, kindBatchEnter: true}

// statusSnapshot is the FLASHGATE_STATUS_SNAPSHOT of the status (snapshot)
// row: issuer.SuggestedStatusSnapshot, the value docs/rooms.md#estimated-wait
// suggests for lines of 100,000s.
const statusSnapshot = "500ms"

// rowSpec is one row of a round: what to start and how to set it up.
type rowSpec struct {
	name     string
	hello    bool   // the bare fiber server (serveHello) instead of flashgate serve
	journal  string // "" (the default bound) or "off" (FLASHGATE_JOURNAL_MAXLEN=off)
	snapshot string // FLASHGATE_STATUS_SNAPSHOT ("": the default, exact statuses)
	kind     string // hello, ping, batched-ping, batched-enter, enter, status, status-snapshot, exchange, complete, jwks
}

// profiled reports whether -profile takes a CPU profile of the row (in the
// last round): every flashgate row but the journal-off duplicates.
func (s rowSpec) profiled() bool { return !s.hello && s.journal == "" }

// rows is the order of a round for -journal.
func (o options) rows() []rowSpec {
	on, off := o.journal != "off", o.journal != "on"
	var rs []rowSpec
	want := maps.Clone(helloKinds) // the bare server's rows always run
	for _, k := range strings.Split(o.kinds, ",") {
		want[strings.TrimSpace(k)] = true
	}
	add := func(name, kind, journal string, ok bool) {
		if ok && want[kind] {
			rs = append(rs, rowSpec{name: name, kind: kind, journal: journal, hello: helloKinds[kind]})
			if kind == kindStatusSnap {
				rs[len(rs)-1].snapshot = statusSnapshot
			}
		}
	}
	add(rowBare, "hello", "", true)
	add(rowPing, "ping", "", true)
	add(rowBatchPing, kindBatchPing, "", true)
	add(rowBatchEnter, kindBatchEnter, "", true)
	add(rowEnter, "enter", "", on)
	add(rowEnterOff, "enter", "off", off)
	add(rowStatus, "status", "", true)
	add(rowStatusSnap, kindStatusSnap, "", true)
	add(rowExchange, "exchange", "", on)
	add(rowExchangeOff, "exchange", "off", off)
	add(rowComplete, "complete", "", on)
	add(rowCompleteOff, "complete", "off", off)
	add(rowJWKS, "jwks", "", true)
	return rs
}

// bench runs every round and prints the table; its result is the exit status.
func bench(ctx context.Context, o options) int {
	ropts, err := redis.ParseURL(o.redisURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchwrk: REDIS_URL:", err)
		return 2
	}
	rdb := redis.NewClient(ropts)
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		fmt.Fprintln(os.Stderr, "benchwrk: Redis:", err)
		return 2
	}
	dir, err := os.MkdirTemp("", "benchwrk-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchwrk:", err)
		return 2
	}
	defer os.RemoveAll(dir)
	b := &bencher{o: o, rdb: rdb, dir: dir, admin: randomB64(24), secret: randomB64(32)}
	if err := b.writeScripts(); err != nil {
		fmt.Fprintln(os.Stderr, "benchwrk:", err)
		return 2
	}
	defer b.procs.killAll()

	specs := o.rows()
	fmt.Printf("benchwrk: %s serve vs bare fiber, wrk -t%d -c%d -d%s, %d rounds, Redis %s, access log %v\n",
		o.bin, o.threads, o.conns, o.duration, o.rounds, o.redisURL, onOff(o.accessLog))
	var runs []run
	for round := 1; round <= o.rounds; round++ {
		for _, spec := range specs {
			if ctx.Err() != nil {
				fmt.Fprintln(os.Stderr, "benchwrk: interrupted")
				return 130
			}
			r := b.measure(ctx, spec, round, round == o.rounds, runs)
			fmt.Println(r)
			runs = append(runs, r)
		}
	}
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.name
	}
	sums := summarize(names, runs)
	fmt.Printf("\nmedians of %d rounds (wrk -t%d -c%d -d%s; %% of the same round's bare /hello and limit rows' req/s, see the legend; CPU µs per request):\n\n",
		o.rounds, o.threads, o.conns, o.duration)
	printTable(os.Stdout, sums)
	for _, r := range runs {
		if !r.ok() {
			return 1
		}
	}
	return 0
}

func onOff(b bool) string {
	if b {
		return "on (output discarded)"
	}
	return "off"
}

// randomB64 is n random bytes, base64 (standard encoding).
func randomB64(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}
