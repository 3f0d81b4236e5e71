package issuer_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/issuer"
)

// Observe reads each counter into its own field, counting from New: a new
// Issuer reads zero, an enter counts one enter call of one user and
// nothing else, and Run's ticks count in TickCalls.
func TestObserve(t *testing.T) {
	ctx := context.Background()
	is, _, room, _ := setup(t, issuer.RoomConfig{Capacity: 10})
	assert.Equal(t, issuer.Observation{}, is.Observe(), "a new Issuer (SetRoom is no coalesced call)")

	_, err := is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	want := issuer.Observation{Batches: issuer.ScriptBatchStats{Enter: issuer.BatchStats{Calls: 1, Items: 1}}}
	assert.Equal(t, want, is.Observe())

	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = is.Run(rctx); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for is.Observe().TickCalls == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	got := is.Observe()
	assert.Positive(t, got.TickCalls, "Run ticked the room")
	got.TickCalls = 0
	assert.Equal(t, want, got, "ticks count in TickCalls alone")
}
