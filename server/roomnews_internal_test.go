package server

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/issuer"
)

// fakeNews counts News calls per room and the most running at once, and
// answers the state it holds.
type fakeNews struct {
	mu      sync.Mutex
	state   issuer.RoomState
	reads   map[string]int
	running atomic.Int32
	most    atomic.Int32
}

func (f *fakeNews) News(_ context.Context, room string, _ time.Duration) (*issuer.RoomNews, error) {
	if r := f.running.Add(1); r > f.most.Load() {
		f.most.Store(r)
	}
	defer f.running.Add(-1)
	time.Sleep(time.Millisecond) // overlapping readers would show in most
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads[room]++
	return &issuer.RoomNews{At: time.Now(), State: f.state}, nil
}

func (f *fakeNews) StatusFrom(context.Context, *issuer.RoomNews, string, string, string) (*issuer.Entry, bool, error) {
	return nil, false, nil
}

func (f *fakeNews) count(room string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads[room]
}

// TestNewsHubOneReaderPerRoom: 200 streams subscribing at once share one
// reader for their room (never two reads at once); a change wakes every one
// of them once, a read without a change none; the reader ends with the
// room's last stream (no more reads), and a new stream starts a new one.
func TestNewsHubOneReaderPerRoom(t *testing.T) {
	f := &fakeNews{state: issuer.RoomOpen, reads: map[string]int{}}
	stop := make(chan struct{})
	defer close(stop)
	h := newNewsHub(f, 20*time.Millisecond, stop)
	subs := make([]*newsSub, 200)
	var wg sync.WaitGroup
	for i := range subs {
		wg.Add(1)
		go func() { defer wg.Done(); subs[i] = h.subscribe("r") }()
	}
	wg.Wait()
	require.Eventually(t, func() bool { return f.count("r") >= 3 }, 5*time.Second, time.Millisecond)
	assert.EqualValues(t, 1, f.most.Load(), "one reader for the room")
	for _, s := range subs {
		select {
		case <-s.changed:
			t.Fatal("woken without a change")
		default:
		}
	}

	f.mu.Lock()
	f.state = issuer.RoomPaused
	f.mu.Unlock()
	h.poke("r")
	for i, s := range subs {
		select {
		case <-s.changed:
		case <-time.After(5 * time.Second):
			t.Fatalf("stream %d not woken", i)
		}
		assert.Equal(t, issuer.RoomPaused, s.latest(h.every).State)
	}

	for _, s := range subs {
		h.unsubscribe(s)
	}
	require.Eventually(t, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.rooms) == 0
	}, 5*time.Second, time.Millisecond, "the reader ends with the last stream")
	n := f.count("r")
	time.Sleep(5 * h.every)
	assert.Equal(t, n, f.count("r"), "no reads without streams")

	s := h.subscribe("r")
	require.Eventually(t, func() bool { return f.count("r") > n }, 5*time.Second, time.Millisecond, "a new stream, a new reader")
	h.unsubscribe(s)
}
