package issuer_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
)

// Estimates (docs/rooms.md#estimated-wait): what the scripts read for
// issuer/entry.go, on real Redis with a fake clock.

func waitingEntry(t *testing.T, is *issuer.Issuer, room, user string) *issuer.Entry {
	t.Helper()
	e, err := is.Enter(context.Background(), room, user)
	require.NoError(t, err)
	require.Equal(t, flashgate.StateWaiting, e.State, "%s waits", user)
	return e
}

func status(t *testing.T, is *issuer.Issuer, e *issuer.Entry) *issuer.Entry {
	t.Helper()
	st, err := is.Status(context.Background(), e.Room, e.User, e.WaitingToken)
	require.NoError(t, err)
	return st
}

// Capacity full with 5-minute sessions and no history: the head of the line
// reads the time to the earliest expiry — not 0 (ahead × 60 s / rate) — and
// it counts down as time passes; the next positions read the next expiries,
// then a whole session more.
func TestEstimateCapacityBoundReadsTheExpiries(t *testing.T) {
	ctx := context.Background()
	is, clk, room, _ := setup(t, issuer.RoomConfig{Capacity: 2, RatePerMinute: 600, SessionDuration: 5 * time.Minute,
		ArrivalWindow: issuer.ArrivalWindowOff})
	admittedEntry(t, is, room, "a") // expires at t0 + 5 min
	clk.Advance(30 * time.Second)
	admittedEntry(t, is, room, "b") // expires at t0 + 5 min 30 s
	clk.Advance(30 * time.Second)
	c := waitingEntry(t, is, room, "c")
	d := waitingEntry(t, is, room, "d")
	e := waitingEntry(t, is, room, "e")
	assert.Equal(t, 4*time.Minute, c.EstimatedWait, "position 1: until a's session ends")
	assert.Equal(t, 4*time.Minute+30*time.Second, d.EstimatedWait, "position 2: until b's")
	assert.Equal(t, 9*time.Minute, e.EstimatedWait, "position 3: a's slot again, after c's session")
	assert.Equal(t, c.EstimatedWait, status(t, is, c).EstimatedWait, "status reads what enter read")

	clk.Advance(time.Minute)
	assert.Equal(t, 3*time.Minute, status(t, is, c).EstimatedWait, "it counts down")
	assert.Equal(t, 8*time.Minute, status(t, is, e).EstimatedWait)
	_, err := is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, 3*time.Minute, status(t, is, c).EstimatedWait, "a tick that admits nobody changes nothing")
}

// After completions free slots at a measured pace, positions read from that
// pace (sooner than the expiries allow): 10 completions in 20 s is one slot
// every 2 s.
func TestEstimateFromTheMeasuredFreeingPace(t *testing.T) {
	ctx := context.Background()
	is, clk, room, _ := setup(t, issuer.RoomConfig{Capacity: 10, RatePerMinute: 6000, SessionDuration: 5 * time.Minute,
		ArrivalWindow: issuer.ArrivalWindowOff})
	var admitted []*issuer.Entry
	for i := range 10 {
		admitted = append(admitted, admittedEntry(t, is, room, "u"+strconv.Itoa(i)))
	}
	var line []*issuer.Entry
	for i := range 30 {
		line = append(line, waitingEntry(t, is, room, "w"+strconv.Itoa(i)))
	}
	assert.Equal(t, 10*time.Millisecond, line[0].EstimatedWait, "no history: the configured pace, 1 at 6000/min")
	for i := range 10 {
		clk.Advance(2 * time.Second)
		_, err := is.Complete(ctx, room, admitted[i].User, admitted[i].AdmissionID)
		require.NoError(t, err)
		res, err := is.Tick(ctx, room)
		require.NoError(t, err)
		require.Equal(t, 1, res.Admitted)
	}
	// 10 ends in 20 s (the window since the first admission).
	perSlot := 2 * time.Second
	for _, p := range []int{1, 10, 20} {
		st := status(t, is, line[10+p-1])
		require.EqualValues(t, p, st.Position)
		assert.InDelta(t, time.Duration(p)*perSlot, st.EstimatedWait, float64(time.Millisecond), "position %d: a slot every 2 s", p)
	}
	late := waitingEntry(t, is, room, "late")
	assert.EqualValues(t, 21, late.Position)
	assert.InDelta(t, 21*perSlot, late.EstimatedWait, float64(time.Millisecond), "enter reads the same pace")
}

// Rate-bound: with no history the configured pace (position × 60 s / rate);
// with history too, and a measured admission rate below the configured one
// because the line was empty (arrivals trickled in) does not slow the
// estimate of a line that has formed: the bucket paces a line at the rate.
func TestEstimateRateBound(t *testing.T) {
	ctx := context.Background()
	is, clk, room, _ := setup(t, issuer.RoomConfig{Capacity: 1000, RatePerMinute: 60})
	admittedEntry(t, is, room, "first")
	admittedEntry(t, is, room, "second") // the bucket's burst: two ticks' worth
	w := waitingEntry(t, is, room, "w0")
	assert.Equal(t, time.Second, w.EstimatedWait, "no history: 1 at 60/min")
	var line []*issuer.Entry
	for i := 1; i < 40; i++ {
		line = append(line, waitingEntry(t, is, room, "w"+strconv.Itoa(i)))
	}
	assert.Equal(t, 40*time.Second, line[38].EstimatedWait)
	for range 20 { // 20 s of history: one admission a second
		clk.Advance(time.Second)
		_, err := is.Tick(ctx, room)
		require.NoError(t, err)
	}
	st := status(t, is, line[38])
	assert.EqualValues(t, 20, st.Position)
	assert.Equal(t, 20*time.Second, st.EstimatedWait)

	// A trickle: one arrival every 10 s for a minute, each admitted at once;
	// then a rush. The line is paced at 60/min, not the 6/min measured.
	trickle := redistest.Room("trickle")
	_, err := is.SetRoom(ctx, trickle, issuer.RoomConfig{Capacity: 1000, RatePerMinute: 60})
	require.NoError(t, err)
	for i := range 7 {
		admittedEntry(t, is, trickle, "t"+strconv.Itoa(i))
		clk.Advance(10 * time.Second)
	}
	admittedEntry(t, is, trickle, "r0")
	admittedEntry(t, is, trickle, "r1")
	for i := 2; i < 12; i++ {
		e := waitingEntry(t, is, trickle, "r"+strconv.Itoa(i))
		assert.Equal(t, time.Duration(i-1)*time.Second, e.EstimatedWait, "r%d", i)
	}
}

// A scripted capacity-bound line: 3 slots, one completion every 4 s, the
// next in line admitted at each. Read after each step of the line, the
// estimate of a user who entered at position 12 never rises, and it closes
// in on what happens (the prior, 3 slots per half minute, is slower than
// the line: it weighs less as the completions are measured).
func TestEstimateDecreasesAsTheLineAdvances(t *testing.T) {
	ctx := context.Background()
	is, clk, room, _ := setup(t, issuer.RoomConfig{Capacity: 3, RatePerMinute: 600, SessionDuration: time.Minute,
		ArrivalWindow: issuer.ArrivalWindowOff})
	var admitted []*issuer.Entry
	for i := range 3 {
		admitted = append(admitted, admittedEntry(t, is, room, "a"+strconv.Itoa(i)))
	}
	var line []*issuer.Entry
	for i := range 20 {
		line = append(line, waitingEntry(t, is, room, "w"+strconv.Itoa(i)))
	}
	tracked := line[11]
	require.EqualValues(t, 12, tracked.Position)
	clk.Advance(5 * time.Second) // history enough to measure (minHistory): the reads below are all measured
	t0 := clk.Now()
	var reads []time.Duration
	var errs []time.Duration // |estimate − the wait that followed|, per read
	for step := 1; ; step++ {
		clk.Advance(4 * time.Second)
		done := admitted[0]
		admitted = admitted[1:]
		_, err := is.Complete(ctx, room, done.User, done.AdmissionID)
		require.NoError(t, err)
		_, err = is.Tick(ctx, room)
		require.NoError(t, err)
		st := status(t, is, tracked)
		if st.State == flashgate.StateActive {
			assert.Equal(t, t0.Add(48*time.Second), clk.Now(), "admitted at the 12th completion")
			break
		}
		require.Equal(t, flashgate.StateWaiting, st.State)
		reads = append(reads, st.EstimatedWait)
		errs = append(errs, (st.EstimatedWait - t0.Add(48*time.Second).Sub(clk.Now())).Abs())
		// the one admitted now completes in its turn
		for _, w := range line {
			if s := status(t, is, w); s.State == flashgate.StateActive && s.AdmissionID != "" && !contains(admitted, s.AdmissionID) {
				admitted = append(admitted, s)
			}
		}
	}
	require.Len(t, reads, 11)
	for i := 1; i < len(reads); i++ {
		assert.LessOrEqual(t, reads[i], reads[i-1], "read %d after read %d: %v", i, i-1, reads)
	}
	assert.Less(t, reads[len(reads)-1], 6*time.Second, "next in line: about one completion away")
	for i := 1; i < len(errs); i++ {
		assert.LessOrEqual(t, errs[i], errs[i-1], "the error shrinks: %v", errs)
	}
	assert.Less(t, errs[len(errs)-1], time.Second, "%v", errs)
}

func contains(es []*issuer.Entry, jti string) bool {
	for _, e := range es {
		if e.AdmissionID == jti {
			return true
		}
	}
	return false
}

// The entry carries the opening time while it is ahead, and the estimate
// counts down to it (plus the line's own wait then); a room the operator
// paused reads −1, with the opening time still there; after opening, no
// OpensAt.
func TestEstimateCountsDownToTheOpening(t *testing.T) {
	ctx := context.Background()
	is, clk, room, _ := setup(t, issuer.RoomConfig{Capacity: 10, RatePerMinute: 600})
	opens := clk.Now().Add(10 * time.Minute)
	_, _, err := is.UpdateRoom(ctx, room, issuer.RoomPatch{Opens: &opens})
	require.NoError(t, err)
	var line []*issuer.Entry
	for i := range 3 {
		line = append(line, waitingEntry(t, is, room, "u"+strconv.Itoa(i)))
	}
	for i, e := range line {
		assert.Equal(t, issuer.RoomPaused, e.RoomState)
		assert.True(t, opens.Equal(e.OpensAt), "u%d: OpensAt %v", i, e.OpensAt)
		assert.Equal(t, 10*time.Minute+time.Duration(i+1)*100*time.Millisecond, e.EstimatedWait, "u%d", i)
	}
	clk.Advance(4 * time.Minute)
	st := status(t, is, line[2])
	assert.True(t, opens.Equal(st.OpensAt))
	assert.Equal(t, 6*time.Minute+300*time.Millisecond, st.EstimatedWait, "counted down")

	_, err = is.SetState(ctx, room, issuer.RoomPaused)
	require.NoError(t, err)
	st = status(t, is, line[2])
	assert.Equal(t, time.Duration(-1), st.EstimatedWait, "paused by the operator: unknown")
	assert.True(t, opens.Equal(st.OpensAt), "the opening time is still a fact")
	_, err = is.SetState(ctx, room, issuer.RoomOpen)
	require.NoError(t, err)

	clk.Advance(6 * time.Minute)
	st = status(t, is, line[2])
	assert.Equal(t, issuer.RoomOpen, st.RoomState)
	assert.True(t, st.OpensAt.IsZero(), "opened: no countdown")
	assert.Equal(t, 300*time.Millisecond, st.EstimatedWait)
}

// Exact positions by default: with users who left between the head and a
// user far behind it, the default issuer counts (ZRANK), where the snapshot
// (an opt-in) would interpolate 175 and flag it estimated.
func TestStatusIsExactByDefault(t *testing.T) {
	ctx := context.Background()
	is, _, room, _ := setup(t, issuer.RoomConfig{Capacity: 1, State: issuer.RoomPaused})
	line := make([]*issuer.Entry, 300)
	for i := range line {
		line[i] = waitingEntry(t, is, room, "u"+strconv.Itoa(i))
	}
	for i := 10; i < 100; i++ {
		require.NoError(t, is.Leave(ctx, room, line[i].User, line[i].WaitingToken))
	}
	st := status(t, is, line[250])
	assert.EqualValues(t, 161, st.Position, "250 − 90 left, 1-based")
	assert.False(t, st.PositionEstimated)
}

// The snapshot (opt-in) computes the estimate by the exact path's rule from
// the same figures, the position's expiry interpolated from a sample of 17:
// within 6 s of the exact answer for every user it answers (the
// interpolation across the gap the completions left is off by up to 5 s).
func TestSnapshotEstimateAgreesWithExact(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	clk := newClock()
	exact := newIssuer(t, rdb, clk)
	snap := newIssuer(t, rdb, clk, func(c *issuer.Config) { c.StatusSnapshot = 2 * time.Second })
	room := redistest.Room("snapeta")
	_, err := exact.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 100, RatePerMinute: 600,
		SessionDuration: 5 * time.Minute, ArrivalWindow: issuer.ArrivalWindowOff})
	require.NoError(t, err)
	var admitted []*issuer.Entry
	for i := range 100 { // one a second: expiries spread over 100 s
		admitted = append(admitted, admittedEntry(t, exact, room, "a"+strconv.Itoa(i)))
		clk.Advance(time.Second)
	}
	var line []*issuer.Entry
	for i := range 400 {
		line = append(line, waitingEntry(t, exact, room, "w"+strconv.Itoa(i)))
	}
	for i := 10; i < 20; i++ { // a gap in the expiries, and a measured pace
		_, err := exact.Complete(ctx, room, admitted[i].User, admitted[i].AdmissionID)
		require.NoError(t, err)
	}
	res, err := exact.Tick(ctx, room)
	require.NoError(t, err)
	require.Equal(t, 10, res.Admitted)
	clk.Advance(3 * time.Second)

	var answered int
	var worst time.Duration
	for _, w := range line[10:] {
		s := status(t, snap, w)
		x := status(t, exact, w)
		require.Equal(t, x.Position, s.Position, "nobody left: the interpolated position is exact")
		if !s.PositionEstimated {
			continue
		}
		answered++
		diff := (s.EstimatedWait - x.EstimatedWait).Abs()
		worst = max(worst, diff)
		assert.LessOrEqual(t, diff, 6*time.Second, "position %d: snapshot %v, exact %v", x.Position, s.EstimatedWait, x.EstimatedWait)
	}
	t.Logf("snapshot answered %d; largest difference from the exact estimate %v", answered, worst)
	assert.Greater(t, answered, 250)
}

// A shuffle room's pre-queue entry has no place yet, so no estimate (−1),
// but it carries the opening time to count down to.
func TestEstimatePreQueueCountsDownWithoutAnEstimate(t *testing.T) {
	opens := newClock().Now().Add(10 * time.Minute) // setup's clock starts where a new one does
	is, _, room, _ := setup(t, issuer.RoomConfig{Capacity: 10, RatePerMinute: 600, PreQueue: issuer.PreQueueShuffle,
		Opens: opens})
	e := waitingEntry(t, is, room, "u0")
	require.True(t, e.PreQueue)
	assert.Equal(t, time.Duration(-1), e.EstimatedWait, "the place is drawn at the opening")
	assert.True(t, opens.Equal(e.OpensAt))
	st := status(t, is, e)
	assert.Equal(t, time.Duration(-1), st.EstimatedWait)
	assert.True(t, opens.Equal(st.OpensAt))
}

// With nobody admitted any more (live 0) and a line longer than the
// capacity, the measured freeing pace still counts: 1 admission in the 11 s
// since the first (a's, at the window's open end) and 2 ends, a slot every
// 11 s; the status script answers such positions without a command of their
// own (lua/status.lua), but with the room's measured history.
func TestEstimateWithNobodyAdmittedReadsTheMeasuredPace(t *testing.T) {
	ctx := context.Background()
	is, clk, room, _ := setup(t, issuer.RoomConfig{Capacity: 2, RatePerMinute: 6000, SessionDuration: 5 * time.Minute,
		ArrivalWindow: issuer.ArrivalWindowOff})
	a := admittedEntry(t, is, room, "a")
	clk.Advance(time.Second)
	b := admittedEntry(t, is, room, "b")
	c := waitingEntry(t, is, room, "c")
	d := waitingEntry(t, is, room, "d")
	e := waitingEntry(t, is, room, "e")
	clk.Advance(10 * time.Second)
	for _, x := range []*issuer.Entry{a, b} {
		_, err := is.Complete(ctx, room, x.User, x.AdmissionID)
		require.NoError(t, err)
	}
	assert.Equal(t, 10*time.Millisecond, status(t, is, c).EstimatedWait, "position 1: the rate's pace")
	assert.Equal(t, 20*time.Millisecond, status(t, is, d).EstimatedWait, "position 2: the rate's pace")
	st := status(t, is, e)
	require.EqualValues(t, 3, st.Position)
	assert.InDelta(t, 11*time.Second, st.EstimatedWait, float64(time.Millisecond), "position 3: one slot at the measured pace")
}
