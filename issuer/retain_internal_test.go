package issuer

import (
	"context"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
)

// aliased returns a string sharing b's bytes, as fiber's request strings
// share the buffers it reuses for the next request.
func aliased(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func scribble(bufs ...[]byte) {
	for _, b := range bufs {
		for i := range b {
			b[i] = 'Z'
		}
	}
}

func syncMapKeys(m interface{ Range(func(k, v any) bool) }) []string {
	var keys []string
	m.Range(func(k, _ any) bool { keys = append(keys, k.(string)); return true })
	return keys
}

// Invariant 7, in the issuer: whatever it keeps beyond a call is a copy, so
// callers may hand it strings over buffers they reuse. Every caller string
// here is overwritten right after the call that got it; the room's batcher,
// the registered rooms, the snapshot map and a cancelled caller's queued
// user id must be unchanged.
func TestIssuerCopiesWhatItKeeps(t *testing.T) {
	ctx := context.Background()
	is, rdb, room := batchIssuer(t, 0, RoomConfig{Capacity: 1})
	is.cfg.StatusSnapshot = SuggestedStatusSnapshot // the snapshot map is opt-in

	roomBuf, aliceBuf := []byte(room), []byte("alice")
	a, err := is.Enter(ctx, aliased(roomBuf), aliased(aliceBuf)) // registers the room, makes its batcher
	require.NoError(t, err)
	tok := a.WaitingToken
	scribble(roomBuf, aliceBuf)

	roomBuf, aliceBuf = []byte(room), []byte("alice")
	_, err = is.Status(ctx, aliased(roomBuf), aliased(aliceBuf), tok) // makes the room's snapshot entry
	require.NoError(t, err)
	scribble(roomBuf, aliceBuf)

	// bob queues behind a call in flight and gives up (his handler returns).
	b := is.roomBatch(room)
	b.enter.mu.Lock()
	b.enter.busy = true
	b.enter.mu.Unlock()
	roomBuf, bobBuf := []byte(room), []byte("bob")
	gone, cancel := context.WithCancel(ctx)
	cancel()
	_, err = is.Enter(gone, aliased(roomBuf), aliased(bobBuf))
	require.ErrorIs(t, err, flashgate.ErrUnavailable)
	scribble(roomBuf, bobBuf)

	assert.Equal(t, []string{room}, syncMapKeys(&is.enterBatchers), "batchers")
	assert.Equal(t, room, b.room)
	assert.Equal(t, []string{room}, syncMapKeys(&is.registered), "registered rooms")
	is.snaps.mu.RLock()
	var snapRooms []string
	for r := range is.snaps.rooms {
		snapRooms = append(snapRooms, r)
	}
	is.snaps.mu.RUnlock()
	assert.Equal(t, []string{room}, snapRooms, "snapshot rooms")
	b.enter.mu.Lock()
	require.Len(t, b.enter.queue, 1)
	assert.Equal(t, "bob", b.enter.queue[0].item, "queued user")
	b.enter.busy = false // the call in flight is over
	b.enter.mu.Unlock()

	// The room still works: carol's call also carries bob's, who is left out.
	c, err := is.Enter(ctx, room, "carol")
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateWaiting, c.State)
	waiting, err := rdb.ZRange(ctx, roomKeys(room)[1], 0, -1).Result()
	require.NoError(t, err)
	assert.Equal(t, []string{"carol"}, waiting)
	rooms, err := is.Rooms(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{room}, rooms)
}
