package faults_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/simulate"
	"github.com/flashgate/flashgate/internal/testing/redistest"
)

// TestScriptFlushDuringSimulation runs a whole flash sale over HTTP (issuer,
// order service, 300 buyers, capacity binding) against a private
// redis-server while another client empties the script cache with SCRIPT
// FLUSH every 50 ms. Every script call that follows a flush meets NOSCRIPT.
//
// The defence is go-redis's EVALSHA → EVAL fallback (redis.Script.Run,
// used by issuer.run) and the pipelined fallback in issuer.runReplicated.
// Without it — e.g. scripts loaded once with SCRIPT LOAD and then only
// EVALSHA'd — every call after the first flush fails with ErrUnavailable
// (503), the buyers exhaust their retries, and Report.Errors, Admitted and
// Completed miss their expected values. A fallback that re-ran a script
// after a partial execution would show as double admissions or completions.
func TestScriptFlushDuringSimulation(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 64})
	t.Cleanup(func() { _ = rdb.Close() })
	flusher := srv.Client(t)

	o := simulate.Options{
		Users:         300,
		Capacity:      20,
		RatePerMinute: 6000,
		// Long enough that a buyer slowed down by a loaded machine does not
		// see its admission lapse (see peakOK).
		SessionDuration: 30 * time.Second,
		Tick:            100 * time.Millisecond,
		Think:           100 * time.Millisecond,
		Abandon:         0.02,
		BadActors:       0.05,
		PollScale:       0.2,
		Timeout:         50 * time.Second,
		Seed:            7,
		Redis:           rdb,
		StoreName:       "redis-server (SCRIPT FLUSH every 50 ms)",
		Room:            redistest.Room("flush"),
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var flushes int
	var flushErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
			if err := flusher.ScriptFlush(ctx).Err(); err != nil {
				if ctx.Err() == nil && flushErr == nil {
					flushErr = err
				}
				continue
			}
			flushes++
		}
	}()

	r, err := simulate.Run(context.Background(), o)
	cancel()
	wg.Wait()
	require.NoError(t, err)
	require.NoError(t, flushErr)

	var text bytes.Buffer
	require.NoError(t, r.WriteText(&text))
	t.Logf("%d script flushes\n%s", flushes, text.String())

	// The fault really hit live traffic: scripts were missing (NOSCRIPT
	// errors counted by the server) and reloaded with EVAL, many times.
	noscript := info(t, flusher, "errorstats", "errorstat_NOSCRIPT", "count")
	evals := info(t, flusher, "commandstats", "cmdstat_eval", "calls")
	t.Logf("NOSCRIPT errors %d, EVAL calls %d", noscript, evals)
	assert.GreaterOrEqual(t, flushes, 10, "the flusher ran during the sale")
	assert.GreaterOrEqual(t, noscript, int64(10), "flushes met live script calls")
	assert.GreaterOrEqual(t, evals, int64(10), "scripts were reloaded with EVAL after NOSCRIPT")

	// Nothing lost, nothing doubled.
	assert.Zero(t, r.Errors, "errors: %v", r.ErrorSamples)
	assert.False(t, r.TimedOut)
	peakOK(t, r)
	assert.Equal(t, o.Users, r.Admitted, "everyone was admitted")
	assert.Equal(t, 6, r.Abandoned) // round(300 × 0.02)
	assert.Equal(t, o.Users-r.Abandoned, r.Completed, "everyone who buys completed")
	assert.Zero(t, r.FIFOViolations)
	assert.LessOrEqual(t, r.MaxAdmittedPerMinute, o.RatePerMinute)
	assert.Zero(t, r.DoubleAdmissions)
	assert.Zero(t, r.DoubleCompletions)
	assert.Zero(t, r.ForgedAccepted)
	// A buyer whose admission lapsed queues again: one more entry each.
	assert.Equal(t, int64(o.Users+r.LostAdmissions), r.Server.Entered, "one entry per buyer and visit")
	assert.Equal(t, int64(r.Completed), r.Server.Completed, "one completion per order")
}

// peakOK checks the capacity invariant of a simulation report: the
// issuer's own peak_active counter always, and the peak the report computes
// from the buyers' records when no admission lapsed. With lapses the
// latter overcounts: the token's exp is the admission's expiry floored to
// the second, so a buyer ordering in that last second is refused "expired",
// queues again, gets the same still-live admission back from enter, and
// the report records it twice (internal/simulate, reported as a bug).
func peakOK(t *testing.T, r *simulate.Report) {
	t.Helper()
	assert.LessOrEqual(t, r.ServerPeakActive, int64(r.Capacity), "the issuer's peak_active")
	if r.LostAdmissions == 0 {
		assert.Empty(t, r.Violations)
		assert.True(t, r.OK)
		assert.LessOrEqual(t, r.PeakActive, r.Capacity)
		assert.Equal(t, int64(r.Admissions), r.Server.Admitted)
	} else {
		t.Logf("%d admissions lapsed: the report's own peak (%d) and violations %v are not checked",
			r.LostAdmissions, r.PeakActive, r.Violations)
		assert.Zero(t, r.FIFOViolations)
		assert.Zero(t, r.DoubleCompletions)
		assert.Zero(t, r.ForgedAccepted)
	}
}
