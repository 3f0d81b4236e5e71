package issuer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The rule of etaFigures.estimate, figure by figure (no Redis: the scripts'
// part, which figures they read, is in eta_test.go).
func TestEstimateRule(t *testing.T) {
	base := etaFigures{now: 1_000_000, rate: 600, batch: 100, tick: 1000, session: 300_000, capacity: 10}

	// Capacity free: the configured pace, position × 60 s / rate (the head
	// reads one admission step, not 0).
	f := base
	f.capacity = 100
	assert.Equal(t, 100*time.Millisecond, f.estimate(1))
	assert.Equal(t, 5*time.Second, f.estimate(50), "p × 100 ms at 600/min")
	// The pace is the lesser of rate and batch per tick.
	f.batch = 1
	assert.Equal(t, 50*time.Second, f.estimate(50), "1 per 1 s tick")

	// Capacity full, no history (less than minHistory): the configured pace
	// alone, as the issue asks ("falling back to the configured rate").
	f = base
	f.live, f.expiry = 10, base.now+40_000
	assert.Equal(t, 100*time.Millisecond, f.estimate(1), "no history: the pace")
	f.window, f.admits = 4_999, 10
	assert.Equal(t, 300*time.Millisecond, f.estimate(3), "still too little history: the pace")
	// A minute of history and nothing ended: the j-th live expiry, then whole sessions.
	f.window, f.admits = 60_000, 10
	assert.Equal(t, 40*time.Second, f.estimate(1), "the head waits for the earliest expiry")
	assert.Equal(t, 40*time.Second, f.estimate(10), "j = 10 ≤ live: the 10th expiry (expiry is eta_expiry's answer for the position)")
	assert.Equal(t, 340*time.Second, f.estimate(11), "j = 11: the 1st expiry + a session")
	assert.Equal(t, 640*time.Second, f.estimate(21), "j = 21: the 1st expiry + two sessions")
	// Some capacity free: the first slots wait for nothing, the next for the expiries.
	f.live = 7
	assert.Equal(t, 300*time.Millisecond, f.estimate(3))
	assert.Equal(t, 40*time.Second, f.estimate(4), "j = 1")
	assert.Equal(t, 300*time.Second, f.estimate(11), "j = 8 > live: a slot free now, refilled and run a session")
	assert.Equal(t, 340*time.Second, f.estimate(14), "j = 11: the 1st expiry + a session")
	// More live than capacity (capacity lowered): the head needs live − capacity + 1 ends.
	f.live, f.capacity = 12, 10
	assert.Equal(t, 40*time.Second, f.estimate(1), "j = 3, the 3rd expiry")

	// Measured: ends and admissions over the window, the lesser; never
	// slower than the expiry bound, never faster than the pace.
	f = base
	f.live, f.expiry = 10, base.now+200_000
	pace := func(freed float64, window int64) time.Duration { // ms per slot
		return time.Duration(float64(window) / freed * float64(time.Millisecond))
	}
	f.window, f.admits, f.ends = 60_000, 30, 20 // 20 slots freed a minute (the 30 admissions include the fill)
	assert.InDelta(t, 10*pace(20, 60_000), f.estimate(10), float64(time.Millisecond), "10 slots at 20 per minute: %v", f.estimate(10))
	assert.Equal(t, 30*time.Second, f.estimate(10))
	f.admits = 12 // fewer refilled than ended (waiting users who left)
	assert.InDelta(t, 10*pace(12, 60_000), f.estimate(10), float64(time.Millisecond), "10 slots at 12 per minute")
	f.expiry = base.now + 20_000
	assert.Equal(t, 20*time.Second, f.estimate(10), "never later than the expiries allow")
	f.expiry, f.admits, f.ends = base.now+200_000, 6000, 6000
	assert.Equal(t, time.Second, f.estimate(10), "never faster than the pace")
	// A history shorter than minHistory is not measured yet: the pace.
	f.window, f.admits, f.ends = 1000, 2, 2
	assert.Equal(t, time.Second, f.estimate(10))
	f.window, f.admits, f.ends = 5000, 2, 2
	assert.InDelta(t, 10*pace(2, 5000), f.estimate(10), float64(time.Millisecond), "5 s: measured")

	// Rate 0 (a room admitting nobody): unknown.
	f = base
	f.rate = 0
	assert.Equal(t, time.Duration(-1), f.estimate(1))
}

func TestEstimateWaitByRoomState(t *testing.T) {
	f := etaFigures{now: 1_000_000, rate: 600, batch: 100, tick: 1000, session: 300_000, capacity: 10, configured: RoomOpen}
	assert.Equal(t, time.Second, f.wait(RoomOpen, 10))
	assert.Equal(t, time.Duration(-1), f.wait(RoomClosed, 10))
	assert.Equal(t, time.Duration(-1), f.wait(RoomPaused, 10), "paused by the operator: no known end")
	f.opens = f.now + 600_000
	assert.Equal(t, 10*time.Minute+time.Second, f.wait(RoomPaused, 10), "before the opening time: until then, plus the estimate")
	f.configured = RoomPaused
	assert.Equal(t, time.Duration(-1), f.wait(RoomPaused, 10), "configured paused: it stays paused at the opening time")
}

// The snapshot path interpolates the j-th live expiry from its sample.
func TestExpiryAtInterpolates(t *testing.T) {
	f := etaFigures{now: 0, sample: []rankedExpiry{{1, 1000}, {5, 5000}, {9, 13000}}}
	for j, want := range map[int64]int64{1: 1000, 3: 3000, 5: 5000, 7: 9000, 9: 13000, 12: 13000} {
		assert.Equal(t, want, f.expiryAt(j), "j = %d", j)
	}
	assert.Equal(t, int64(300_000), etaFigures{session: 300_000, sample: []rankedExpiry{}}.expiryAt(3), "no sample: a session from now")
}

// TestPollAfterFollowsTheSoonest: the poll hint is half the soonest the
// line could reach the entry (the pace alone), within 1–30 s, 10 s when
// unknown — not half the estimate: at place 3 of a full room whose estimate
// waits minutes for slots, the buyer still asks within about a second.
func TestPollAfterFollowsTheSoonest(t *testing.T) {
	within := func(got, base time.Duration) bool { return got >= base*8/10 && got < base*12/10+time.Millisecond }
	full := etaFigures{now: 1_000_000, capacity: 1, live: 1, session: 300_000, batch: 1000, tick: 1000,
		rate: 6000, configured: RoomOpen, expiry: 1_000_000 + 240_000, window: 60_000, admits: 1}
	require.Greater(t, full.wait(RoomOpen, 3), time.Minute, "the estimate waits for slots")
	require.Less(t, full.soonest(RoomOpen, 3), time.Second, "the soonest is the pace's")
	for range 50 {
		assert.True(t, within(pollAfter(full.soonest(RoomOpen, 3)), time.Second))
		assert.True(t, within(pollAfter(4*time.Minute), 30*time.Second), "capped at 30 s")
		assert.True(t, within(pollAfter(40*time.Second), 20*time.Second), "half")
		assert.True(t, within(pollAfter(-1), 10*time.Second), "unknown (paused): 10 s")
	}
	assert.Equal(t, time.Duration(-1), full.soonest(RoomPaused, 3), "paused by the operator: unknown")
}

// forPosition keeps the measured history only for a position that waits
// for capacity (what a call for that entry alone measures), and sets the
// position's expiry.
func TestFiguresForPosition(t *testing.T) {
	f := etaFigures{capacity: 2, live: 1, admits: 7, ends: 5, window: 1000, session: 10000}
	for _, c := range []struct {
		pos     int64
		history bool
	}{{0, false}, {1, false}, {2, true}, {30, true}} {
		got := f.forPosition(c.pos, 42)
		assert.Equal(t, int64(42), got.expiry, "pos %d", c.pos)
		assert.Equal(t, f.session, got.session, "pos %d", c.pos)
		if c.history {
			assert.Equal(t, [3]int64{7, 5, 1000}, [3]int64{got.admits, got.ends, got.window}, "pos %d", c.pos)
		} else {
			assert.Equal(t, [3]int64{}, [3]int64{got.admits, got.ends, got.window}, "pos %d", c.pos)
		}
	}
	over := etaFigures{capacity: 2, live: 5, window: 1000} // capacity lowered below live
	assert.Zero(t, over.forPosition(0, 0).window, "the pre-queue never measures")
	assert.Equal(t, int64(1000), over.forPosition(1, 0).window)
}
