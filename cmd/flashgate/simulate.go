package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/flashgate/flashgate/internal/redisconn"
	"github.com/flashgate/flashgate/internal/simulate"
)

func runSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fset.SetOutput(stderr)
	var o simulate.Options
	fset.IntVar(&o.Users, "users", 10000, "number of buyers")
	fset.IntVar(&o.Capacity, "capacity", 100, "room capacity: total active users")
	fset.IntVar(&o.RatePerMinute, "rate", 6000, "room rate: new users per minute")
	fset.DurationVar(&o.SessionDuration, "session", 30*time.Second, "session duration (admission lifetime), whole seconds")
	fset.DurationVar(&o.Tick, "tick", 200*time.Millisecond, "room admission tick (100ms…1m)")
	fset.DurationVar(&o.Think, "think", time.Second, "mean time a buyer shops between admission and order (uniform in [0, 2×think])")
	fset.Float64Var(&o.Abandon, "abandon", 0.02, "fraction of buyers who never order (their admissions expire)")
	fset.Float64Var(&o.TabClose, "tab-close", 0, "fraction of buyers who close the tab while waiting (never exchange; e.g. 0.02)")
	fset.DurationVar(&o.ArrivalWindow, "arrival-window", time.Minute, "room arrival window: admissions not exchanged within it end early (0: off; no effect unless shorter than --session)")
	fset.StringVar(&o.PreQueue, "prequeue", "fifo", "room pre-queue order: fifo | shuffle (a lottery drawn at opening for everyone who arrived before it; see --opens-in)")
	fset.DurationVar(&o.OpensIn, "opens-in", 0, "open the room this long after the start (buyers arriving before form the pre-queue; 0: open from the start)")
	fset.IntVar(&o.SoldOutAfter, "sold-out-after", 0, "declare the sale sold out (POST …/sold-out) once this many orders went through: every still-waiting buyer must end CLOSED (0: never)")
	fset.Float64Var(&o.PriorityShare, "priority-share", 0, "fraction of buyers holding a single-use priority invite: they wait in the priority lane, admitted before the public line (e.g. 0.05)")
	fset.Float64Var(&o.BypassShare, "bypass-share", 0, "fraction of buyers holding a single-use bypass invite: admitted at once when capacity and rate allow")
	fset.Float64Var(&o.BadActors, "bad-actors", 0.02, "fraction of buyers who try a tampered and a foreign-product token, then replay theirs")
	fset.StringVar(&o.Room, "room", "flash-sale", "waiting room (product) id")
	fset.Float64Var(&o.PollScale, "poll-scale", 1, "multiply the issuer's poll_after_ms by this (e.g. 0.2 for quick runs)")
	fset.DurationVar(&o.Ramp, "ramp", 0, "spread arrivals over this duration (0: everyone at once)")
	fset.DurationVar(&o.Timeout, "timeout", 5*time.Minute, "give up after this long")
	fset.IntVar(&o.MaxConns, "max-conns", 256, "HTTP connections per server")
	fset.Uint64Var(&o.Seed, "seed", 0, "random seed for roles and think times (0: random)")
	redisURL := fset.String("redis", "", "queue store URL (default: embedded in-memory Redis, miniredis)")
	fset.StringVar(&o.Journal, "journal", "", "PostgreSQL URL: also run the journal process in-process, and report what it wrote for the room (the schema is migrated first)")
	fset.DurationVar(&o.RetryFor, "retry-for", 10*time.Second, "how long a buyer retries a call that fails in transit or answers 502/503/504/429")
	fset.StringVar(&o.IssuerURL, "issuer-url", "", "use this running issuer instead of starting one in-process")
	fset.StringVar(&o.AdminToken, "admin-token", "", "admin token of --issuer-url")
	fset.StringVar(&o.TokenIssuer, "token-issuer", "flashgate", "iss of admission tokens")
	fset.StringVar(&o.Audience, "audience", "orders", "aud of admission tokens")
	asJSON := fset.Bool("json", false, "print the report as one JSON object on stdout")
	quiet := fset.Bool("quiet", false, "no progress lines on stderr")
	fset.Usage = func() {
		fmt.Fprintf(fset.Output(), "Usage: flashgate simulate [flags]\n\n"+
			"Simulates a flash sale over real HTTP: an issuer (in-process unless --issuer-url), an order service\n"+
			"that verifies admission tokens offline, and --users concurrent buyers. Prints a report and exits 1\n"+
			"when an invariant is broken (FIFO within each lane, capacity, rate, double admission, forged token or\n"+
			"double order) or a buyer could not finish. With --priority-share/--bypass-share it reports lane fairness.\n"+
			"\nFlags:\n")
		fset.PrintDefaults()
	}
	if code, ok := parseFlags(fset, args, stdout, stderr); !ok {
		return code
	}
	if code, ok := noArgs(fset, stderr); !ok {
		return code
	}
	for name, v := range map[string]int64{"--users": int64(o.Users), "--capacity": int64(o.Capacity),
		"--rate": int64(o.RatePerMinute), "--session": int64(o.SessionDuration), "--tick": int64(o.Tick),
		"--timeout": int64(o.Timeout), "--max-conns": int64(o.MaxConns), "--retry-for": int64(o.RetryFor)} {
		if v <= 0 {
			fmt.Fprintf(stderr, "flashgate simulate: %s must be positive\n", name)
			return exitUsage
		}
	}
	if o.PollScale <= 0 {
		fmt.Fprintf(stderr, "flashgate simulate: --poll-scale must be positive\n")
		return exitUsage
	}
	// The flags' defaults are the Options defaults, so a zero here was asked
	// for explicitly; Options reads zero as "default" and negative as "none".
	if o.Abandon == 0 {
		o.Abandon = -1
	}
	if o.BadActors == 0 {
		o.BadActors = -1
	}
	if o.Think == 0 {
		o.Think = -1
	}
	if o.ArrivalWindow == 0 {
		o.ArrivalWindow = -1 // off
	}
	if !*quiet {
		o.Progress = stderr
	}
	o.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if *redisURL != "" {
		rdb, _, err := redisconn.Open(*redisURL)
		if err != nil {
			fmt.Fprintf(stderr, "flashgate simulate: --redis: %v\n", err)
			return exitUsage
		}
		defer rdb.Close()
		redisconn.LogTo(o.Logger)
		breaker := redisconn.Protect(rdb, redisconn.BreakerOptions{Logger: o.Logger})
		defer breaker.Close()
		o.Redis, o.StoreName = rdb, "redis "+redactURL(*redisURL)
	}
	r, err := simulate.Run(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "flashgate simulate: %v\n", err)
		return exitFailure
	}
	if *asJSON {
		line, _ := json.Marshal(r)
		fmt.Fprintf(stdout, "%s\n", line)
	} else {
		_ = r.WriteText(stdout)
	}
	if !r.OK {
		return exitFailure
	}
	return exitOK
}
