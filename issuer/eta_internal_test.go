package issuer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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

	// Capacity full, no history: the prior, capacity slots per half session
	// (10 per 150 s), under the expiry bound.
	f = base
	f.live, f.expiry = 10, base.now+40_000
	assert.Equal(t, 15*time.Second, f.estimate(1), "the head: one slot at 10 per 150 s")
	assert.Equal(t, 40*time.Second, f.estimate(3), "never later than the expiries allow")
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

	// Measured: ends and admissions over the window, the lesser, with the
	// prior worth 5 s (10 per 150 s: 1/3 of a slot); never slower than the
	// expiry bound, never faster than the pace.
	f = base
	f.live, f.expiry = 10, base.now+200_000
	pace := func(freed float64, window int64) time.Duration { // ms per slot
		return time.Duration((float64(window) + 5000) / (freed + 1.0/3) * float64(time.Millisecond))
	}
	f.window, f.admits, f.ends = 60_000, 30, 20 // 20 slots freed a minute (the 30 admissions include the fill)
	assert.InDelta(t, 10*pace(20, 60_000), f.estimate(10), float64(time.Millisecond), "10 slots at 20 per minute: %v", f.estimate(10))
	assert.InDelta(t, 30*time.Second, f.estimate(10), float64(2*time.Second))
	f.admits = 12 // fewer refilled than ended (waiting users who left)
	assert.InDelta(t, 10*pace(12, 60_000), f.estimate(10), float64(time.Millisecond), "10 slots at 12 per minute")
	f.expiry = base.now + 20_000
	assert.Equal(t, 20*time.Second, f.estimate(10), "never later than the expiries allow")
	f.expiry, f.admits, f.ends = base.now+200_000, 6000, 6000
	assert.Equal(t, time.Second, f.estimate(10), "never faster than the pace")
	// A short history: the prior still weighs (2 ends in 1 s read as 2⅓ in 6 s).
	f.window, f.admits, f.ends = 1000, 2, 2
	assert.InDelta(t, 10*pace(2, 1000), f.estimate(10), float64(time.Millisecond))

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

// TestPollAfterNearTheHead: the poll hint is half the estimate within
// 1–30 s (10 s while paused), but the first NearHeadPlaces places ask at
// least every NearHeadPoll, however long their estimate: a completion can
// free a slot before the estimated pace says.
func TestPollAfterNearTheHead(t *testing.T) {
	within := func(got, base time.Duration) bool { return got >= base*8/10 && got < base*12/10+time.Millisecond }
	for range 50 {
		assert.True(t, within(pollAfter(4*time.Minute, NearHeadPlaces+1), 30*time.Second), "far back: capped at 30 s")
		assert.True(t, within(pollAfter(40*time.Second, NearHeadPlaces+1), 20*time.Second), "far back: half the estimate")
		assert.True(t, within(pollAfter(4*time.Minute, 3), NearHeadPoll), "near the head: at most NearHeadPoll")
		assert.True(t, within(pollAfter(time.Second, 1), time.Second), "at least 1 s")
		assert.True(t, within(pollAfter(-1, 3), 10*time.Second), "paused: 10 s, near the head too")
		assert.True(t, within(pollAfter(4*time.Minute, 0), 30*time.Second), "no position (pre-queue): no near-head bound")
	}
}
