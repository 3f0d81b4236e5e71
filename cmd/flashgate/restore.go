package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/flashgate/flashgate/cmd/flashgate/internal/restore"
	"github.com/flashgate/flashgate/internal/redisconn"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/journal"
)

// runRestore is `flashgate restore --room R`: cmd/flashgate/internal/restore rebuilds a
// room lost with Redis's data from the journal (docs/operations.md#restoring-a-room).
// The journal's DSN comes from --dsn or FLASHGATE_JOURNAL_DSN, Redis from
// serve's REDIS_URL (no embedded Redis: there would be nothing to
// restore into).
func runRestore(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	room := fs.String("room", "", "the room to restore (required)")
	dsn := fs.String("dsn", "", "PostgreSQL DSN of the journal (default: $FLASHGATE_JOURNAL_DSN)")
	dry := fs.Bool("dry-run", false, "read the journal and print what would be restored; write nothing")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: REDIS_URL=… FLASHGATE_JOURNAL_DSN=… flashgate restore --room R [--dry-run] [--dsn DSN]\n\n"+
			"Rebuilds a room's waiting line (same order), live admissions, ended records and counters in Redis\n"+
			"from the journal in PostgreSQL, with the journaled epoch. Refuses a room that has entries in Redis.\n\n")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if *dsn == "" {
		*dsn = os.Getenv("FLASHGATE_JOURNAL_DSN")
	}
	if fs.NArg() > 0 || *room == "" || *dsn == "" {
		fmt.Fprintln(stderr, "flashgate restore: --room and a DSN (--dsn or FLASHGATE_JOURNAL_DSN) are required, and no arguments (see -h)")
		return exitUsage
	}
	cfg, err := loadServeEnv(nil)
	if err != nil {
		fmt.Fprintf(stderr, "flashgate restore: %v\n", err)
		return exitUsage
	}
	if !*dry && cfg.RedisURL == "" {
		fmt.Fprintln(stderr, "flashgate restore: REDIS_URL is not set (the queue store to restore into)")
		return exitUsage
	}
	store, err := journal.Open(ctx, *dsn)
	if err != nil {
		fmt.Fprintf(stderr, "flashgate restore: %v\n", err)
		return exitFailure
	}
	defer store.Close()
	start := time.Now()
	if *dry {
		st, err := restore.Plan(ctx, store, *room, start)
		if err != nil {
			fmt.Fprintf(stderr, "flashgate restore: %v\n", err)
			return exitFailure
		}
		fmt.Fprintf(stdout, "dry run: room %s epoch %s: %d entries to restore (live or ended within the horizon), seq %d, admno %d, state %s; took %s\n",
			*room, st.Epoch, len(st.Entries), st.MaxArrival, st.MaxAdmission, st.Config["state"], time.Since(start).Round(time.Millisecond))
		return exitOK
	}
	rdb, _, err := redisconn.Open(cfg.RedisURL)
	if err != nil {
		fmt.Fprintf(stderr, "flashgate restore: REDIS_URL: %v\n", err)
		return exitUsage
	}
	defer rdb.Close()
	res, err := restore.Room(ctx, store, issuer.Redis(rdb), *room, start)
	if err != nil {
		fmt.Fprintf(stderr, "flashgate restore: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "restored room %s: epoch %s, waiting %d, priority %d, live %d, ended %d, seq %d, admno %d, %d calls, took %s\n",
		*room, res.Epoch, res.Waiting, res.Priority, res.Live, res.Ended, res.Seq, res.Admno, res.Calls,
		time.Since(start).Round(time.Millisecond))
	return exitOK
}
