package server

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The requests of one millisecond share one budget context, whose deadline
// is theirs rounded up to the millisecond; another millisecond gets its own.
func TestBudgetsShareAMillisecond(t *testing.T) {
	var bs budgets
	base := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	a := bs.until(base.Add(100 * time.Microsecond))
	b := bs.until(base.Add(900 * time.Microsecond))
	assert.Same(t, a.(any), b.(any), "one context per millisecond")
	d, ok := a.Deadline()
	require.True(t, ok)
	assert.Equal(t, base.Add(time.Millisecond).UnixNano(), d.UnixNano(), "rounded up, never earlier than asked")

	exact := bs.until(base.Add(time.Millisecond))
	assert.Same(t, a.(any), exact.(any), "a deadline on the millisecond is that millisecond's")

	next := bs.until(base.Add(1500 * time.Microsecond))
	assert.NotSame(t, a.(any), next.(any))
	late := bs.until(base.Add(200 * time.Microsecond))
	d, _ = late.Deadline()
	assert.Equal(t, base.Add(time.Millisecond).UnixNano(), d.UnixNano(), "a late request of an earlier millisecond keeps its deadline")
	assert.Same(t, next.(any), bs.until(base.Add(1600*time.Microsecond)).(any), "and does not take the newer one's place")
}

// A shared budget ends at its deadline (its own timer), not before: one
// request ending does not cut its neighbours' short.
func TestBudgetsEndAtTheDeadline(t *testing.T) {
	var bs budgets
	ctx := bs.until(time.Now().Add(30 * time.Millisecond))
	require.NoError(t, ctx.Err())
	select {
	case <-ctx.Done():
		assert.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
	case <-time.After(5 * time.Second):
		t.Fatal("the budget never ended")
	}
}

// The API routes' context carries Options.RedisTimeout from the request's
// start (rounded up to the millisecond), for every request.
func TestRequestBudgetDeadline(t *testing.T) {
	e := newEnv(t, withOptions(func(o *Options) { o.RedisTimeout = 700 * time.Millisecond }))
	var got []time.Time
	e.srv.app.Get("/test/budget", e.srv.noStoreBudget, func(c *fiber.Ctx) error {
		d, ok := c.UserContext().Deadline()
		require.True(t, ok, "a deadline")
		require.NoError(t, c.UserContext().Err())
		got = append(got, d)
		return c.SendStatus(fiber.StatusNoContent)
	})
	for range 3 {
		start := time.Now()
		res, err := e.srv.app.Test(httptest.NewRequest("GET", "/test/budget", nil), -1)
		require.NoError(t, err)
		_ = res.Body.Close()
		assert.Equal(t, "no-store", res.Header.Get("Cache-Control"))
		d := got[len(got)-1]
		assert.False(t, d.Before(start.Add(700*time.Millisecond)), "not before start + RedisTimeout")
		assert.True(t, d.Before(time.Now().Add(701*time.Millisecond)), "at most 1 ms after it: %v", d.Sub(start))
	}
}
