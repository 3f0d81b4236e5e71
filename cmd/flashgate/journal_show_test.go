package main

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/pgtest"
	"github.com/flashgate/flashgate/journal"
)

var updateJournalGolden = flag.Bool("update-journal", false, "rewrite testdata/journal_*.golden from the output")

func TestJournalQueriesHelp(t *testing.T) {
	for _, args := range [][]string{{"journal", "-h"}, {"journal", "show", "-h"}, {"journal", "report", "--help"}} {
		r := runCLI(t, "", args...)
		assert.Equal(t, exitOK, r.code, "%v", args)
		assert.Contains(t, r.stdout, "Usage", "%v", args)
		assert.Empty(t, r.stderr, "%v", args)
	}
	assert.Contains(t, runCLI(t, "", "journal", "show", "-h").stdout, "-user")
	assert.Contains(t, runCLI(t, "", "journal", "report", "-h").stdout, "-epoch")
}

func TestJournalQueriesUsageErrors(t *testing.T) {
	t.Setenv(journalDSNEnv, "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"journal", "show", "--room", "r", "--user", "u"}, "FLASHGATE_JOURNAL_DSN"},
		{[]string{"journal", "report", "--room", "r"}, "FLASHGATE_JOURNAL_DSN"},
		{[]string{"journal", "show", "--user", "u", "--dsn", "postgres://x"}, "--room is required"},
		{[]string{"journal", "show", "--room", "r", "--dsn", "postgres://x"}, "--user is required"},
		{[]string{"journal", "report", "--room", "r", "--epoch", "NOPE!", "--dsn", "postgres://x"}, "not a room epoch"},
		{[]string{"journal", "report", "--room", "r", "extra"}, "unexpected argument"},
		{[]string{"journal"}, "Usage"},
		{[]string{"journal", "frobnicate"}, "unknown command"},
	} {
		r := runCLI(t, "", c.args...)
		assert.Equal(t, exitUsage, r.code, "%v", c.args)
		assert.Contains(t, r.stderr, c.want, "%v", c.args)
		assert.Empty(t, r.stdout, "%v", c.args)
	}
}

// journalSale is a small journaled sale (times from 2026-11-27 09:00 UTC):
// alice left the line once, came back, waited 41.2 s and completed; bob's
// admission went unclaimed; carol still waits; dave waited until sold out;
// erin is live.
func journalSale() []journal.Event {
	t0 := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC).UnixMilli()
	const ep = "ab12cd34ef"
	ev := func(kind journal.Kind, arrival, at int64, user, lane, reason string) journal.Event {
		return journal.Event{Kind: kind, Room: "sale", Epoch: ep, Arrival: arrival, At: t0 + at, User: user, Lane: lane, Reason: reason}
	}
	adm := func(arrival, n, at int64) journal.Event {
		e := ev(journal.KindAdmitted, arrival, at, "", "public", "")
		e.AdmissionID = flashgate.AdmissionID{Epoch: ep, Arrival: arrival, Number: n, AdmittedAt: time.UnixMilli(t0 + at)}.String()
		return e
	}
	shown := func(e journal.Event, ms int64) journal.Event { // the estimate its enter showed
		d := time.Duration(ms) * time.Millisecond
		e.EstimatedWait = &d
		return e
	}
	xch := adm(3, 2, 51_200)
	xch.Kind, xch.At, xch.Lane = journal.KindExchanged, t0+52_000, ""
	return []journal.Event{
		ev(journal.KindEntered, 1, 0, "alice", "public", ""), ev(journal.KindLeft, 1, 5_000, "", "", ""),
		shown(ev(journal.KindEntered, 2, 1_000, "bob", "public", ""), 25_000), adm(2, 1, 30_000),
		ev(journal.KindExpired, 2, 90_000, "", "", "not_claimed"),
		shown(ev(journal.KindEntered, 3, 10_000, "alice", "public", ""), 45_000), adm(3, 2, 51_200), xch,
		ev(journal.KindCompleted, 3, 130_000, "", "", ""),
		ev(journal.KindEntered, 4, 20_000, "carol", "public", ""),
		ev(journal.KindEntered, 5, 21_000, "dave", "public", ""), ev(journal.KindClosed, 5, 180_000, "", "", "sold_out"),
		ev(journal.KindEntered, 6, 22_000, "erin", "priority", ""), adm(6, 3, 70_500),
	}
}

func TestJournalShowAndReport(t *testing.T) {
	dsn := pgtest.Start(t).NewDatabase(t)
	ctx := context.Background()
	require.NoError(t, journal.Migrate(ctx, dsn))
	st, err := journal.Open(ctx, dsn)
	require.NoError(t, err)
	defer st.Close()
	require.NoError(t, st.Apply(ctx, journalSale()))
	t.Setenv(journalDSNEnv, dsn) // the environment's DSN; --dsn is tried below

	for _, c := range []struct {
		golden string
		args   []string
	}{
		{"journal_show.golden", []string{"show", "--room", "sale", "--user", "alice"}},
		{"journal_show_all.golden", []string{"show", "--room", "sale", "--user", "alice", "--all"}},
		{"journal_show_waiting.golden", []string{"show", "--room", "sale", "--user", "carol"}},
		{"journal_show.json.golden", []string{"show", "--room", "sale", "--user", "alice", "--json", "--dsn", dsn}},
		{"journal_report.golden", []string{"report", "--room", "sale"}},
		{"journal_report.json.golden", []string{"report", "--room", "sale", "--epoch", "ab12cd34ef", "--json"}},
	} {
		r := runCLI(t, "", append([]string{"journal"}, c.args...)...)
		require.Equal(t, exitOK, r.code, "%v: %s", c.args, r.stderr)
		require.Empty(t, r.stderr)
		path := filepath.Join("testdata", c.golden)
		if *updateJournalGolden {
			require.NoError(t, os.WriteFile(path, []byte(r.stdout), 0o644))
		}
		want, err := os.ReadFile(path)
		require.NoError(t, err, "run with -update-journal to create it")
		require.Equal(t, string(want), r.stdout, "%v (testdata/%s)", c.args, c.golden)
	}

	r := runCLI(t, "", "journal", "show", "--room", "sale", "--user", "mallory")
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, `no entry of user "mallory" in room "sale"`)
	r = runCLI(t, "", "journal", "report", "--room", "nope")
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, `nothing journaled for room "nope"`)
	r = runCLI(t, "", "journal", "report", "--room", "sale", "--dsn", "postgres://127.0.0.1:1/x?connect_timeout=1")
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "FLASHGATE_JOURNAL_DSN")
}
