package issuer

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// coalescer coalesces concurrent calls of one kind for one room into one
// script call (group commit). The first caller to find the room idle sends
// a batch of whoever is queued at that moment — alone, when the line is
// quiet, so a lone call waits for nothing. Callers that arrive while a batch
// is in flight queue up and go together in the next call, up to
// Config.EnterBatch items, in arrival order. One call carries the script's
// fixed cost (EVALSHA dispatch, the prelude, the room's config, TIME, the
// round trip with its syscalls) for the whole batch (docs/performance.md#measurements).
//
// Leadership passes from caller to caller: the caller that sent a batch
// delivers its results and, when callers are queued, wakes the first of
// them still waiting, which sends the next batch from its own goroutine. No
// goroutine is created per batch (the enter batcher before it started one,
// `go flush()`, per batch while callers waited); only when a woken leader
// has given up in the same instant does a goroutine take over its batch.
//
// Semantics are those of the items run one after another in queue order:
// each kind's script runs ARGV's items in turn, so a batch behaves as its
// callers in the order they reached the coalescer, and a go-redis retry of
// a batch is as idempotent as a retry of one call.
type coalescer[T, R any] struct {
	room string // the room's id, the coalescer's own copy (invariant 7)
	max  int
	send func(ctx context.Context, items []T) ([]outcome[R], error)

	mu sync.Mutex
	// busy: a batch is in flight, or a leader has been woken to send one.
	// One call per room at a time measured best (a one-off trial with two in
	// flight halved the batches while the round trip stayed as long,
	// BenchmarkEnterHTTP at 64 connections).
	busy  bool
	queue []*pending[T, R]
}

// outcome is one item's result in a batch: its reply, or its own error
// (a script's {'ERROR', code} for that item alone).
type outcome[R any] struct {
	res R
	err error
}

// pending is one caller waiting in a coalescer.
type pending[T, R any] struct {
	item T
	ctx  context.Context
	// wake is closed once: when the result is in (res, err), or when the
	// caller is handed leadership (lead, set under the coalescer's mutex).
	wake chan struct{}
	lead bool
	gone bool // gave up (its context ended); set under the mutex
	// res points at the caller's result in its batch's reply (nil without
	// one: an error): a reply (scriptEntry, ~330 bytes) is not copied into
	// every waiter, each of which is a heap object.
	res *R
	err error
}

// result is c's result and error.
func (c *pending[T, R]) result() (R, error) {
	if c.res == nil {
		var zero R
		return zero, c.err
	}
	return *c.res, c.err
}

// call returns item's result: through the queue (do, with clone(item):
// the queue outlives a caller that gave up, and item's strings may alias
// its buffers, invariant 7), or — with batches of one (Config.EnterBatch 1:
// no coalescing) — in a call of its own, concurrent with the room's others.
func (b *coalescer[T, R]) call(ctx context.Context, item T, clone func(T) T) (R, error) {
	if b.max == 1 {
		out, err := b.send(ctx, []T{item})
		if err != nil {
			var zero R
			return zero, err
		}
		return out[0].res, out[0].err
	}
	return b.do(ctx, clone(item))
}

// do queues item and returns its result once its batch has run, or ctx's
// error (as flashgate.ErrUnavailable) if ctx ends first — the batch may
// still carry the item out, exactly as when a reply is lost; a retry then
// answers as a repeat does. item must not alias caller buffers that are
// reused after do returns (the queue outlives a caller that gave up).
func (b *coalescer[T, R]) do(ctx context.Context, item T) (R, error) {
	c := &pending[T, R]{item: item, ctx: ctx, wake: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	lead := !b.busy // busy false: the queue was empty, c is its head
	b.busy = true
	b.mu.Unlock()
	if lead {
		b.run(c)
		return c.result()
	}
	select {
	case <-c.wake:
	case <-ctx.Done():
		b.mu.Lock()
		handed := c.lead
		if !handed {
			c.gone = true // a leader handing over skips it
		}
		b.mu.Unlock()
		if !handed {
			var zero R
			return zero, unavailable(ctx.Err())
		}
		// Handed leadership as it gave up: its batch must still go.
		go b.run(nil)
		var zero R
		return zero, unavailable(ctx.Err())
	}
	if c.lead {
		b.run(c)
	}
	return c.result()
}

// run sends one batch from the head of the queue (leader, when not nil, is
// its first caller), delivers its results and hands leadership to the first
// caller still waiting, or marks the room idle.
func (b *coalescer[T, R]) run(leader *pending[T, R]) {
	b.mu.Lock()
	n := min(len(b.queue), b.max)
	batch := make([]*pending[T, R], n)
	copy(batch, b.queue)
	b.queue = append(b.queue[:0], b.queue[n:]...)
	b.mu.Unlock()

	b.flush(batch, leader)

	b.mu.Lock()
	var next *pending[T, R]
	for len(b.queue) > 0 {
		c := b.queue[0]
		if !c.gone && c.ctx.Err() == nil {
			next = c
			break
		}
		// Gave up (or is giving up: it finds itself not handed): left out.
		b.queue[0] = nil
		b.queue = b.queue[1:]
	}
	if next != nil {
		next.lead = true
	} else {
		b.busy = false
		b.queue = b.queue[:0:0] // drop the backing array of a burst
	}
	b.mu.Unlock()
	if next != nil {
		close(next.wake)
	}
}

// flush runs send for batch. Callers whose context already ended are left
// out; the call runs under the first remaining caller's context values
// without its cancellation, since it serves everyone in the batch, and with
// the latest of their deadlines (when they all have one): a hung Redis then
// holds the batch, and its leading caller, no longer than the callers' own
// budgets. A whole-call error reaches every caller of the batch; an item's
// own error only its caller.
func (b *coalescer[T, R]) flush(batch []*pending[T, R], leader *pending[T, R]) {
	done := func(c *pending[T, R]) {
		if c != leader && !c.lead {
			close(c.wake)
		}
	}
	items := make([]T, 0, len(batch))
	live := make([]*pending[T, R], 0, len(batch))
	for _, c := range batch {
		if c.ctx.Err() != nil {
			c.err = unavailable(c.ctx.Err())
			done(c)
			continue
		}
		items = append(items, c.item)
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	ctx := context.WithoutCancel(live[0].ctx)
	if d, ok := latestDeadline(live); ok {
		// Nobody waits for the reply past the last caller's deadline.
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d)
		defer cancel()
	}
	res, err := b.send(ctx, items)
	for i, c := range live {
		if err != nil {
			c.err = err
		} else {
			c.res, c.err = &res[i].res, res[i].err
		}
		done(c)
	}
}

// latestDeadline returns the latest of the callers' deadlines, or false
// when one of them has none.
func latestDeadline[T, R any](calls []*pending[T, R]) (time.Time, bool) {
	var last time.Time
	for _, c := range calls {
		d, ok := c.ctx.Deadline()
		if !ok {
			return time.Time{}, false
		}
		if d.After(last) {
			last = d
		}
	}
	return last, true
}

// Each coalesced path has its own coalescer per room, in a map of its own,
// declared with its path: the enter coalescer (enterBatch, enter.go),
// status and exchange share theirs (statusBatch, status.go: one status
// script call carries both), completions theirs (completeBatch,
// admission.go). New ones keep a copy of
// room (as their map key too): the caller's string may alias a buffer that is
// reused after the call (invariant 7; fiber's request strings do).

// batchOf returns m's coalescer of room, made with send(its own copy of
// room) and max items a call when it is the first.
func batchOf[T, R any](m *sync.Map, room string, max int, send func(room string) func(context.Context, []T) ([]outcome[R], error)) *coalescer[T, R] {
	if c, ok := m.Load(room); ok {
		return c.(*coalescer[T, R])
	}
	room = strings.Clone(room)
	c, _ := m.LoadOrStore(room, &coalescer[T, R]{room: room, max: max, send: send(room)})
	return c.(*coalescer[T, R])
}

// batchKind counts one kind's script calls and the items they carried.
type batchKind struct{ calls, items atomic.Int64 }

func (k *batchKind) add(items int) {
	k.calls.Add(1)
	k.items.Add(int64(items))
}
