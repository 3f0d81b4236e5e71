package issuer

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer/store"
)

// heldMinted is a Redis whose minted script calls wait for release and are
// counted (calls, and the keys they carried).
type heldMinted struct {
	*redis.Client
	release     chan struct{}
	calls, keys atomic.Int64
}

func (h *heldMinted) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if sha == store.Hash("minted") {
		h.calls.Add(1)
		h.keys.Add(int64(len(keys)))
		<-h.release
	}
	return h.Client.EvalSha(ctx, sha, keys, args...)
}

// The writer takes whatever queued while it wrote (one call for the
// notes of a burst, per room), a note that finds the queue full is dropped
// and counted, and WaitMinted returns once every queued note has landed.
func TestMintedNotesWriter(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	h := &heldMinted{Client: rdb, release: make(chan struct{})}
	is, err := New(Config{Redis: h, WaitingSecret: make([]byte, 32), Issuer: "i", Audience: "a"})
	require.NoError(t, err)
	is.notes = make(chan mintedNote, 3)
	room := redistest.Room("notes")
	mint := func(i int) *Admission {
		a := &Admission{ID: "e0." + strconv.Itoa(i) + ".1.1", Token: "token-" + strconv.Itoa(i), ExpiresAt: time.Now().Add(time.Minute)}
		is.noteMinted(room, a)
		return a
	}
	first := mint(1)
	require.Eventually(t, func() bool { return h.calls.Load() == 1 }, 5*time.Second, time.Millisecond, "the writer took the first note")
	var queued []*Admission
	for i := 2; i <= 4; i++ {
		queued = append(queued, mint(i))
	}
	mint(5) // the queue (3) is full
	assert.Equal(t, int64(1), is.Observe().MintedNotesLost)
	waited := make(chan error, 1)
	go func() { waited <- is.WaitMinted(ctx) }()
	select {
	case <-waited:
		t.Fatal("WaitMinted returned with notes in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(h.release)
	require.NoError(t, <-waited)
	assert.Equal(t, int64(2), h.calls.Load(), "the three queued notes went together")
	assert.Equal(t, int64(4), h.keys.Load())
	for _, a := range append(queued, first) {
		assert.Equal(t, MintedDigest(a.Token), rdb.Get(ctx, mintedKey(room, a.ID)).Val(), a.ID)
	}
	assert.Zero(t, rdb.Exists(ctx, mintedKey(room, "e0.5.1.1")).Val(), "the dropped note")
	assert.Equal(t, int64(1), is.Observe().MintedNotesLost)

	// Expired already: no note.
	is.noteMinted(room, &Admission{ID: "e0.6.1.1", Token: "t6", ExpiresAt: time.Now().Add(-time.Second)})
	require.NoError(t, is.WaitMinted(ctx))
	assert.Equal(t, int64(4), h.keys.Load())
}
