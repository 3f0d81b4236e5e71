package simulate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/simulate"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/keys"
	"github.com/flashgate/flashgate/server"
)

// small is a run that makes the capacity bind: 300 buyers, 20 at a time.
func small() simulate.Options {
	return simulate.Options{
		Users:           300,
		Capacity:        20,
		RatePerMinute:   6000,
		SessionDuration: 5 * time.Second,
		Tick:            100 * time.Millisecond,
		Think:           100 * time.Millisecond,
		Abandon:         0.02,
		BadActors:       0.05,
		PollScale:       0.2,
		Timeout:         3 * time.Minute,
		Seed:            42,
	}
}

func checkReport(t *testing.T, r *simulate.Report, o simulate.Options) {
	t.Helper()
	var text bytes.Buffer
	require.NoError(t, r.WriteText(&text))
	t.Logf("\n%s", text.String())

	assert.Empty(t, r.Violations)
	assert.Zero(t, r.Errors, "errors: %v", r.ErrorSamples)
	assert.False(t, r.TimedOut)
	assert.True(t, r.OK)
	assert.Equal(t, o.Users, r.Users)
	assert.Equal(t, o.Users, r.Admitted)
	assert.Equal(t, 6, r.Abandoned) // round(300 × 0.02)
	assert.Equal(t, 15, r.BadActors)
	assert.Equal(t, o.Users-r.Abandoned, r.Completed)
	assert.Zero(t, r.FIFOViolations)
	assert.LessOrEqual(t, r.PeakActive, o.Capacity)
	assert.LessOrEqual(t, r.ServerPeakActive, int64(o.Capacity))
	assert.LessOrEqual(t, r.MaxAdmittedPerMinute, o.RatePerMinute)
	assert.Zero(t, r.DoubleAdmissions)
	assert.Zero(t, r.ForgedAccepted)
	assert.Zero(t, r.DoubleCompletions)
	// Capacity binds: with 300 buyers and 20 places, someone waited.
	assert.Equal(t, o.Capacity, r.PeakActive)
	assert.Less(t, r.FastTrack, o.Users)
	assert.Positive(t, r.WaitMaxMs)

	// Every bad actor was refused three times, for the right reason.
	assert.Equal(t, int64(r.BadActors), r.Rejections["bad_signature"])
	assert.Equal(t, int64(r.BadActors), r.Rejections["bad_product"])
	assert.Equal(t, int64(r.BadActors), r.Rejections["completed"])
	// Verified offline: every order plus every replay.
	assert.Equal(t, int64(r.Completed+r.BadActors), r.TokensVerified)

	assert.Equal(t, int64(o.Users), r.Server.Entered)
	assert.Equal(t, int64(o.Users), r.Server.Admitted)
	assert.Equal(t, int64(r.Completed), r.Server.Completed)

	var m map[string]any
	b, err := json.Marshal(r)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &m))
	for _, k := range []string{"users", "admitted", "completed", "fifo_violations", "peak_active", "capacity",
		"max_admitted_per_minute", "rate_per_minute", "wait_p50_ms", "wait_p95_ms", "wait_max_ms",
		"tokens_verified", "rejections", "duration_ms", "double_admissions"} {
		assert.Contains(t, m, k)
	}
}

func TestRunRealRedis(t *testing.T) {
	o := small()
	o.Redis = redistest.Client(t)
	o.StoreName = "redis-server (test)"
	o.Room = redistest.Room("sim")
	r, err := simulate.Run(context.Background(), o)
	require.NoError(t, err)
	checkReport(t, r, o)
}

func TestRunEmbedded(t *testing.T) {
	o := small()
	r, err := simulate.Run(context.Background(), o)
	require.NoError(t, err)
	assert.Contains(t, r.Store, "miniredis")
	checkReport(t, r, o)
}

// TestRunLanes: a run with priority and bypass invites on real Redis: the
// invariants hold (FIFO within each lane), the lanes are reported, every
// invite is used once, and the priority lane waits less than the public line.
func TestRunLanes(t *testing.T) {
	o := small()
	o.Redis = redistest.Client(t)
	o.Room = redistest.Room("simlanes")
	o.PriorityShare, o.BypassShare = 0.1, 0.02
	r, err := simulate.Run(context.Background(), o)
	require.NoError(t, err)
	checkReport(t, r, o)
	l := r.Lanes
	require.NotNil(t, l)
	assert.Zero(t, l.OrderViolations)
	assert.Zero(t, l.Public.FIFOViolations+l.Priority.FIFOViolations)
	assert.Equal(t, int64(36), r.Server.InvitesUsed, "round(300 × 0.1) + round(300 × 0.02), one use each")
	assert.Equal(t, int64(l.Priority.Admitted), r.Server.PriorityAdmitted)
	assert.Equal(t, int64(l.Bypass.Admitted), r.Server.Bypassed)
	assert.Equal(t, 36, l.Priority.Admitted+l.Bypass.Admitted, "every invited buyer admitted through a lane")
	assert.Less(t, l.Priority.WaitMeanMs, l.Public.WaitMeanMs, "the priority lane goes first")
}

func TestOptionsValidated(t *testing.T) {
	for name, o := range map[string]simulate.Options{
		"session not whole seconds": {SessionDuration: 1500 * time.Millisecond},
		"tick too short":            {Tick: time.Millisecond},
		"fractions above one":       {Abandon: 0.6, BadActors: 0.6},
		"tab close above one":       {Abandon: 0.5, TabClose: 0.6},
		"arrival window too short":  {ArrivalWindow: 10 * time.Millisecond},
		"bad room":                  {Room: "a b"},
		"bad prequeue":              {PreQueue: "random"},
		"issuer without admin":      {IssuerURL: "http://127.0.0.1:1"},
		"lane shares above one":     {PriorityShare: 0.7, BypassShare: 0.4},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := simulate.Run(context.Background(), o)
			assert.Error(t, err)
		})
	}
}

// TestRunAgainstRunningIssuer drives an issuer started outside the
// simulation (--issuer-url): completions go through its /v1/complete.
func TestRunAgainstRunningIssuer(t *testing.T) {
	rdb := redistest.Client(t)
	ctx := context.Background()
	ring, err := keys.Generate(time.Now())
	require.NoError(t, err)
	secret, err := issuer.LoadOrCreateSecret(ctx, rdb)
	require.NoError(t, err)
	is, err := issuer.New(issuer.Config{Redis: rdb, Signer: ring, WaitingSecret: secret})
	require.NoError(t, err)
	srv, err := server.New(server.Options{Issuer: is, Keys: ring, AdminToken: "admin"})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Listen(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	tctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = is.Run(tctx) }()
	t.Cleanup(func() { stop(); <-done })

	o := small()
	o.Users = 100
	o.IssuerURL, o.AdminToken = "http://"+ln.Addr().String(), "admin"
	o.Room = redistest.Room("remote")
	r, err := simulate.Run(ctx, o)
	require.NoError(t, err)
	var text bytes.Buffer
	require.NoError(t, r.WriteText(&text))
	t.Logf("\n%s", text.String())
	assert.True(t, r.OK, "violations %v, errors %v", r.Violations, r.ErrorSamples)
	assert.Equal(t, o.Users-r.Abandoned, r.Completed)
	assert.Equal(t, int64(r.Completed), r.Server.Completed)
	assert.Equal(t, int64(r.BadActors), r.Rejections["completed"])
	assert.Contains(t, r.Store, "issuer at")

	_, err = simulate.Run(ctx, simulate.Options{IssuerURL: o.IssuerURL, AdminToken: "wrong", Users: 1})
	assert.Error(t, err, "a wrong admin token cannot configure the room")
}

// TestTabCloseIdleSlotSeconds: buyers who close the tab while waiting are
// admitted in their turn and never exchange; the same run (same seed) with
// the arrival window off holds each of their slots for the whole session,
// with a 2 s window for 2 s. The invariants hold either way, and the window
// shortens the sale.
func TestTabCloseIdleSlotSeconds(t *testing.T) {
	run := func(window time.Duration) *simulate.Report {
		o := simulate.Options{Users: 200, Capacity: 10, RatePerMinute: 60000, SessionDuration: 6 * time.Second,
			Tick: 100 * time.Millisecond, Think: 50 * time.Millisecond, Abandon: -1, BadActors: -1, TabClose: 0.05,
			ArrivalWindow: window, PollScale: 0.1, Timeout: 2 * time.Minute, Seed: 7}
		r, err := simulate.Run(context.Background(), o)
		require.NoError(t, err)
		var text bytes.Buffer
		require.NoError(t, r.WriteText(&text))
		t.Logf("\n%s", text.String())
		assert.True(t, r.OK, "violations %v, errors %v", r.Violations, r.ErrorSamples)
		assert.Equal(t, 10, r.TabClosed)
		assert.Equal(t, 10, r.TabClosedAdmitted, "every closed tab was admitted in its turn")
		assert.Equal(t, 190, r.Completed)
		assert.Zero(t, r.FIFOViolations)
		assert.LessOrEqual(t, r.PeakActive, 10)
		return r
	}
	off, on := run(-1), run(2*time.Second)
	assert.Zero(t, off.ArrivalWindowMs)
	assert.EqualValues(t, 2000, on.ArrivalWindowMs)
	assert.InDelta(t, 10*6.0, off.IdleSlotSeconds, 2, "off: each closed tab holds a slot for the session")
	assert.InDelta(t, 10*2.0, on.IdleSlotSeconds, 2, "on: for the window")
	assert.InDelta(t, 10*2000, on.IdleSlotMs, 2000, "idle_slot_ms: the same in ms")
	assert.InDelta(t, on.IdleSlotSeconds*1000, float64(on.IdleSlotMs), 0.5)
	assert.Zero(t, off.Server.NotClaimed)
	assert.EqualValues(t, 10, on.Server.NotClaimed+int64(on.Server.Active), "not claimed, or still holding at the end")
}

// TestRunPreQueueLottery: buyers who arrive before the opening form a
// shuffle room's pre-queue, on the embedded store (miniredis: the scripts'
// SHA-1 and number formatting there) and on redis-server. Every invariant
// holds with the order check following the published draw, and the
// pre-queue is not admitted in arrival order (rank correlation far from 1).
// The audit takes the public path only: the room view's seed, epoch and
// cutoff, and every buyer's join receipt checked against it and the JWKS.
func TestRunPreQueueLottery(t *testing.T) {
	for _, store := range []string{"embedded", "redis"} {
		t.Run(store, func(t *testing.T) {
			o := small()
			o.PreQueue = "shuffle"
			o.OpensIn = 2 * time.Second
			if store == "redis" {
				o.Redis = redistest.Client(t)
				o.Room = redistest.Room("sim")
			}
			r, err := simulate.Run(context.Background(), o)
			require.NoError(t, err)
			checkReport(t, r, o)
			require.NotNil(t, r.Lottery)
			assert.Equal(t, "shuffle", r.PreQueue)
			assert.EqualValues(t, o.Users, r.Lottery.Cutoff, "everyone arrived before the opening")
			assert.GreaterOrEqual(t, r.Lottery.Receipts, o.Users, "every pre-queue entrant's receipt checked")
			assert.Zero(t, r.Lottery.ReceiptsRefused, "by the public room view and JWKS")
			assert.Zero(t, r.Lottery.MissingReceipts)
			assert.Len(t, r.Lottery.Commitment, 64)
			assert.Equal(t, o.Users, r.Lottery.PreQueueAdmitted)
			assert.Less(t, r.Lottery.RankCorrelation, 0.5, "not arrival order")
			assert.Len(t, r.Lottery.Seed, 32)
		})
	}
}

// TestSoldOutEndsTheWait: sold out after 50 orders (embedded miniredis), every
// buyer still waiting ends CLOSED with reason sold_out — none is left
// waiting, none errs — the issuer's drain empties the line, and the
// invariants hold for the admissions made before it.
func TestSoldOutEndsTheWait(t *testing.T) {
	o := small()
	o.SoldOutAfter = 50
	r, err := simulate.Run(context.Background(), o)
	require.NoError(t, err)
	var text bytes.Buffer
	require.NoError(t, r.WriteText(&text))
	t.Logf("\n%s", text.String())
	require.NotNil(t, r.SoldOut, "no sold-out declared: errors %v", r.ErrorSamples)
	assert.True(t, r.OK, "violations %v, errors %v", r.Violations, r.ErrorSamples)
	assert.Positive(t, r.SoldOut.Closed, "buyers were waiting at the sold-out")
	assert.Zero(t, r.SoldOut.WrongReason)
	assert.Equal(t, int64(r.SoldOut.Closed), r.SoldOut.ClosedOut, "the drain removed exactly the closed line")
	assert.Zero(t, r.SoldOut.WaitingAtEnd)
	assert.Equal(t, o.Users, r.Admitted+r.SoldOut.Closed+r.SoldOut.Refused, "every buyer admitted, closed or refused")
	assert.Equal(t, r.ExpectedOrders, r.Completed)
}
