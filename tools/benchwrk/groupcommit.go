package main

import (
	"sync"
	"sync/atomic"
)

// maxBatch is the most items one groupCommit call carries (the bare
// server's batches; flashgate's are bounded by Config.ScriptBatch). Under wrk
// -c64 a batch never holds more than 64.
const maxBatch = 10_000

// groupCommit is the bare server's batcher (POST /batched and
// /batched-enter of serveHello): a leader-handoff group commit like
// issuer/batch.go's coalescer, without its per-item results, contexts and
// give-ups. The first caller to find it idle sends whoever is queued (itself
// alone when nobody else is); callers that arrive while a batch is in flight
// queue up, and the caller that sent a batch, once it has delivered the
// error to its batch, wakes the first queued caller, which sends the next
// batch (up to maxBatch items, in arrival order) from its own goroutine. No
// goroutine is created per batch. Its cost is what flashgate's batching of
// enters costs at the least: one mutex round and one channel wake per item,
// one send per batch.
type groupCommit struct {
	// send sends one batch (≥ 1 items); its error is every item's.
	send func(items []string) error
	// calls counts send's calls, items the items they carried (tests and
	// the package's own checks read them).
	calls, items atomic.Int64

	mu    sync.Mutex
	busy  bool // a batch is in flight, or a leader has been woken to send one
	queue []*groupWaiter
}

// groupWaiter is one caller queued in a groupCommit.
type groupWaiter struct {
	item string
	// wake is closed when err is set (the batch ran) or when the waiter
	// has been made leader (lead, set under the mutex).
	wake chan struct{}
	lead bool
	err  error
}

// do queues item (which must not alias a buffer reused after do returns:
// the caller copies fiber's zero-copy strings) and returns send's error for
// the batch that carried it.
func (g *groupCommit) do(item string) error {
	w := &groupWaiter{item: item, wake: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, w)
	lead := !g.busy // idle: the queue was empty and w is its head
	g.busy = true
	g.mu.Unlock()
	if !lead {
		<-w.wake
		if !w.lead {
			return w.err
		}
	}
	g.run()
	return w.err
}

// run sends one batch from the head of the queue (whose first waiter is the
// caller running it), delivers the error to its waiters and hands leadership
// to the next queued waiter, or marks the batcher idle.
func (g *groupCommit) run() {
	g.mu.Lock()
	n := min(len(g.queue), maxBatch)
	batch := make([]*groupWaiter, n)
	copy(batch, g.queue)
	g.queue = append(g.queue[:0], g.queue[n:]...)
	g.mu.Unlock()

	items := make([]string, n)
	for i, w := range batch {
		items[i] = w.item
	}
	g.calls.Add(1)
	g.items.Add(int64(n))
	err := g.send(items)
	for i, w := range batch {
		w.err = err
		if i > 0 { // batch[0] is the leader: it reads err itself
			close(w.wake)
		}
	}

	g.mu.Lock()
	var next *groupWaiter
	if len(g.queue) > 0 {
		next = g.queue[0]
		next.lead = true
	} else {
		g.busy = false
	}
	g.mu.Unlock()
	if next != nil {
		close(next.wake)
	}
}

// queued is how many callers wait for a batch (tests).
func (g *groupCommit) queued() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue)
}
