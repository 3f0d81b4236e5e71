package server

import (
	"sync"
	"time"
)

// windowCounter counts events per key in fixed windows, in memory, per
// replica: the limits that count something other than requests (room
// creations, failed admin logins), which fiber's limiter middleware
// cannot. A key's window starts at its first event.
type windowCounter struct {
	max    int
	window time.Duration
	now    func() time.Time

	mu      sync.Mutex
	m       map[string]*windowEntry
	sweepAt time.Time
}

type windowEntry struct {
	n   int
	end time.Time
}

func newWindowCounter(max int, window time.Duration) *windowCounter {
	return &windowCounter{max: max, window: window, now: time.Now, m: map[string]*windowEntry{}}
}

// entry returns key's live entry, sweeping expired ones once a window;
// w.mu is held.
func (w *windowCounter) entry(key string, now time.Time) *windowEntry {
	if now.After(w.sweepAt) {
		for k, e := range w.m {
			if !now.Before(e.end) {
				delete(w.m, k)
			}
		}
		w.sweepAt = now.Add(w.window)
	}
	e := w.m[key]
	if e != nil && !now.Before(e.end) {
		e = nil
	}
	return e
}

// full reports whether key has had max events in its current window, and
// then how long until the window ends (whole seconds, at least 1 s).
func (w *windowCounter) full(key string) (retry time.Duration, full bool) {
	return w.count(key, false)
}

// add counts one event of key, full or not.
func (w *windowCounter) add(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.bump(key, w.now())
}

// take counts one event of key unless its window is full (then nothing is
// counted, and retry is the time until the window ends).
func (w *windowCounter) take(key string) (retry time.Duration, ok bool) {
	retry, full := w.count(key, true)
	return retry, !full
}

// count is full, and with add also counts the event when not full.
func (w *windowCounter) count(key string, add bool) (time.Duration, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	if e := w.entry(key, now); e != nil && e.n >= w.max {
		return retryOf(e.end.Sub(now)), true
	}
	if add {
		w.bump(key, now)
	}
	return 0, false
}

// bump counts one event of key (a copy of key is kept); w.mu is held.
func (w *windowCounter) bump(key string, now time.Time) {
	e := w.entry(key, now)
	if e == nil {
		e = &windowEntry{end: now.Add(w.window)}
		w.m[key] = e
	}
	e.n++
}

// retryOf rounds d up to whole seconds, at least 1 s (Retry-After).
func retryOf(d time.Duration) time.Duration {
	return max(time.Second, (d+time.Second-1)/time.Second*time.Second)
}
