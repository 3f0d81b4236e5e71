package issuer

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/flashgate/flashgate"
)

// enterBatcher coalesces concurrent Enter calls for one room into one enter
// script call (group commit). The first caller to find the room idle sends a
// batch of whoever is queued at that moment — alone, when the line is quiet,
// so a lone enter waits for nothing. Callers that arrive while a batch is in
// flight queue up and go together in the next call, up to Config.EnterBatch
// users, in arrival order. One call carries the script's fixed cost
// (EVALSHA dispatch, ten keys, the room's config, the round trip) for the
// whole batch: in Redis a call costs about 25 µs plus about 3 µs per user
// (README "Measurements").
//
// Semantics are those of the users entering one after another in queue
// order: the script enters ARGV[3..] in turn, so FIFO across and within
// batches follows the order callers reached the batcher, and a user twice in
// one batch gets one place. A go-redis retry of a batch is as idempotent as
// a retry of one enter.
type enterBatcher struct {
	is   *Issuer
	room string

	mu sync.Mutex
	// busy: a batch is in flight. One call per room at a time measured best
	// (a one-off trial with two in flight halved the batches while the round
	// trip stayed as long, BenchmarkEnterHTTP at 64 connections).
	busy  bool
	queue []*enterCall
}

type enterCall struct {
	user string
	ctx  context.Context
	done chan struct{}
	res  scriptEntry
	err  error
}

// batcher returns room's enterBatcher. A new batcher keeps a copy of room
// (as its map key too): the caller's string may alias a buffer that is
// reused after the call (invariant 7; fiber's request strings do).
func (is *Issuer) batcher(room string) *enterBatcher {
	if b, ok := is.batchers.Load(room); ok {
		return b.(*enterBatcher)
	}
	room = strings.Clone(room)
	b, _ := is.batchers.LoadOrStore(room, &enterBatcher{is: is, room: room})
	return b.(*enterBatcher)
}

// enter queues user and returns its result once its batch has run,
// or ctx's error (as flashgate.ErrUnavailable) if ctx ends first — the batch may still
// enter the user, exactly as when a reply is lost; a retry returns that entry.
// The queue holds a copy of user: a caller that gave up has returned, and
// its string may alias a reused buffer.
func (b *enterBatcher) enter(ctx context.Context, user string) (scriptEntry, error) {
	c := &enterCall{user: strings.Clone(user), ctx: ctx, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	lead := !b.busy
	b.busy = true
	b.mu.Unlock()
	if lead {
		b.flush()
	}
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		return scriptEntry{}, unavailable(ctx.Err())
	}
}

// flush sends one batch from the head of the queue, delivers its results,
// and hands over to a new flush while callers are waiting.
func (b *enterBatcher) flush() {
	b.mu.Lock()
	n := min(len(b.queue), b.is.cfg.EnterBatch)
	batch := make([]*enterCall, n)
	copy(batch, b.queue)
	b.queue = append(b.queue[:0], b.queue[n:]...)
	b.mu.Unlock()

	b.send(batch)

	b.mu.Lock()
	more := len(b.queue) > 0
	b.busy = more // a new flush takes over while callers wait
	b.mu.Unlock()
	if more {
		go b.flush()
	}
}

// send runs the enter script for batch. Callers whose context already ended
// are left out; the call runs under the first remaining caller's context
// values without its cancellation, since it serves everyone in the batch,
// and with the latest of their deadlines (when they all have one): a hung
// Redis then holds the batch, and its leading caller, no longer than the
// callers' own budgets.
func (b *enterBatcher) send(batch []*enterCall) {
	args := make([]any, 0, len(batch))
	live := batch[:0:0]
	for _, c := range batch {
		if c.ctx.Err() != nil {
			c.err = unavailable(c.ctx.Err())
			close(c.done)
			continue
		}
		args = append(args, c.user)
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
	res, err := b.is.enterUsers(ctx, b.room, args...)
	for i, c := range live {
		if err != nil {
			c.err = err
		} else {
			c.res = res[i]
		}
		close(c.done)
	}
}

// latestDeadline returns the latest of the callers' deadlines, or false
// when one of them has none.
func latestDeadline(calls []*enterCall) (time.Time, bool) {
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

// EnterBatchStats reports the enter script calls this Issuer has sent and
// the users they carried (counting from New); users/calls is the mean batch
// size. Enter calls that bypass coalescing (EnterBatch 1) count as batches of one.
func (is *Issuer) EnterBatchStats() (calls, users int64) {
	return is.batchCalls.Load(), is.batchUsers.Load()
}

// enterUsers runs the enter script for users, in that order, and decodes
// its reply (decodeEnter).
//
// With limited auto rooms (Config.MaxAutoRooms) an unknown room is created
// only once its slot is reserved: the first call may not create it
// (createArg), and on unknown_room the slot is reserved (reserveAutoRoom,
// another Cluster slot than the room's, so not in the script) and the call
// repeated with the default policy. Errors: those of the script, and
// flashgate.ErrRoomLimit.
func (is *Issuer) enterUsers(ctx context.Context, room string, users ...any) ([]scriptEntry, error) {
	is.batchCalls.Add(1)
	is.batchUsers.Add(int64(len(users)))
	policy := is.createArg(enterScript, room)
	r, err := is.runPolicy(ctx, enterScript, room, policy, users...)
	if err != nil && policy == "" && is.autoLimited() && errors.Is(err, flashgate.ErrUnknownRoom) && !errors.Is(err, errRoomDeleted) {
		if err := is.reserveAutoRoom(ctx, room); err != nil {
			return nil, err
		}
		is.batchCalls.Add(1)
		is.batchUsers.Add(int64(len(users)))
		r, err = is.runPolicy(ctx, enterScript, room, is.defaultPolicy(), users...)
	}
	if err != nil {
		return nil, err
	}
	return decodeEnter(r, len(users))
}
