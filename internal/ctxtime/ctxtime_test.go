package ctxtime

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestSleep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	assert.True(t, Sleep(ctx, 0), "a live context, no wait")
	assert.True(t, Sleep(ctx, time.Millisecond), "d passed")
	cancel()
	assert.False(t, Sleep(ctx, 0), "an ended context")
	assert.False(t, Sleep(ctx, time.Hour), "ctx ends first (at once: it already has)")
}
