package issuer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestNextTickBacksOffIdleRooms: a room with nothing to do is ticked at
// twice its tick, then ever more slowly, up to the idle maximum; any work
// brings it back to its tick at once; a negative maximum never backs off.
func TestNextTickBacksOffIdleRooms(t *testing.T) {
	idle := TickResult{Tick: time.Second}
	var got []time.Duration
	prev := time.Duration(0)
	for i := 0; i < 6; i++ {
		wait, p := nextTick(idle, prev, 10*time.Second)
		got = append(got, wait)
		prev = p
	}
	assert.Equal(t, []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second,
		10 * time.Second, 10 * time.Second}, got)
	for _, busy := range []TickResult{{Waiting: 1}, {Active: 1}, {Draining: 3}, {Admitted: 1}, {Expired: 1}, {ClosedOut: 2}} {
		busy.Tick = time.Second
		wait, p := nextTick(busy, prev, 10*time.Second)
		assert.Equal(t, time.Second, wait, "%+v", busy)
		assert.Zero(t, p)
	}
	wait, p := nextTick(idle, 0, -1)
	assert.Equal(t, time.Second, wait, "IdleTickMax < 0: no back-off")
	assert.Zero(t, p)
	wait, _ = nextTick(TickResult{Tick: 30 * time.Second}, 0, 10*time.Second)
	assert.Equal(t, 30*time.Second, wait, "never faster than the room's own tick")
}

// TestEnterWakesAnIdleRoom: a room Run ticks slowly is sent to Run once by
// the next wake (an enter through this replica), and not again until Run
// marks it idle again; a busy room costs a wake nothing.
func TestEnterWakesAnIdleRoom(t *testing.T) {
	is := &Ticker{&core{wakeups: make(chan string, 4)}}
	is.wake("r") // not idle: nothing
	assert.Len(t, is.wakeups, 0)
	is.setIdle("r", true)
	is.wake("r")
	is.wake("r")
	assert.Len(t, is.wakeups, 1, "one wake-up")
	assert.Equal(t, "r", <-is.wakeups)
	is.setIdle("r", false)
	is.wake("r")
	assert.Len(t, is.wakeups, 0)
	is.setIdle("r", true)
	is.wake("r")
	assert.Len(t, is.wakeups, 1)
}
