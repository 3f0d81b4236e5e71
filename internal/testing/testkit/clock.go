package testkit

import (
	"sync"
	"time"
)

// Clock is a fake clock that moves only when told. It is safe for
// concurrent use; pass its Now method where a func() time.Time is wanted
// (issuer.Config.Now, verifier.Config.Now).
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// Epoch is the default start of a Clock: 2026-11-20T12:00:00Z.
var Epoch = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

// NewClock returns a clock reading start.
func NewClock(start time.Time) *Clock { return &Clock{t: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock by d (which may be negative).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Set sets the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}
