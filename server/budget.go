package server

import (
	"context"
	"sync/atomic"
	"time"
)

// budgets hands out the request budget contexts of noStoreBudget
// (Options.RedisTimeout): one context.Context per millisecond of deadline,
// shared by every request whose deadline falls in it, instead of one
// context.WithDeadline per request — its timer, its three allocations and
// its cancellation were 4–7 % of an exact status's server CPU
// (BenchmarkHandlerStatus; 3.6 % in benchwrk's profile). A request's
// deadline is its start plus the budget, rounded up to the next whole
// millisecond: at most 1 ms later.
//
// A shared context is never cancelled before its deadline (a request that
// ends does not end its neighbours' budget); its timer ends it then, and it
// holds nothing but the deadline (no values: it derives from
// context.Background, so it is used only when the request's own context is
// Background, fiber's default). Under load at most 1,000 are live per
// second of budget.
type budgets struct {
	cur atomic.Pointer[budget]
}

// budget is one shared deadline context.
type budget struct {
	ms  int64 // the deadline, Unix ms
	ctx context.Context
	// end is ctx's cancel: never called early (ctx is shared), kept with it.
	end context.CancelFunc
}

// until returns a context that ends at deadline rounded up to the whole
// millisecond (Unix ms), shared with the other callers of that millisecond.
func (bs *budgets) until(deadline time.Time) context.Context {
	ms := deadline.UnixMilli()
	if deadline.Sub(time.UnixMilli(ms)) > 0 {
		ms++ // rounded up: never earlier than asked
	}
	if b := bs.cur.Load(); b != nil && b.ms == ms {
		return b.ctx
	}
	// A new millisecond (or a late request of an earlier one: it gets its
	// own, rather than taking the newer, later deadline's place).
	ctx, end := context.WithDeadline(context.Background(), time.UnixMilli(ms))
	b := &budget{ms: ms, ctx: ctx, end: end}
	if cur := bs.cur.Load(); cur == nil || cur.ms < ms {
		bs.cur.CompareAndSwap(cur, b)
	}
	return ctx
}
