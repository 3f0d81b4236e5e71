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

// fakeWalker records the walks of a hub's feeds.
type fakeWalker struct {
	mu      sync.Mutex
	walks   int
	changed []*issuer.RoomNews // the news of each walk told of a change
	sizes   []int              // streams per walk
}

func (w *fakeWalker) walk(_ *roomFeed, streams []*sseStream, n *issuer.RoomNews, changed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.walks++
	w.sizes = append(w.sizes, len(streams))
	if changed {
		w.changed = append(w.changed, n)
	}
}

func (w *fakeWalker) step() time.Duration { return 5 * time.Millisecond }

func (w *fakeWalker) count() (walks, changed int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.walks, len(w.changed)
}

// TestNewsHubOneReaderPerRoom: 200 streams joining at once share one
// reader for their room (never two reads at once), read once per interval
// however often the streams are walked; a change is told to one walk (of
// all 200 streams), a read without a change to none; the reader ends with
// the room's last stream (no more reads), and a new stream starts a new one.
func TestNewsHubOneReaderPerRoom(t *testing.T) {
	f := &fakeNews{state: issuer.RoomOpen, reads: map[string]int{}}
	w := &fakeWalker{}
	stop := make(chan struct{})
	defer close(stop)
	h := newNewsHub(f, w, 40*time.Millisecond, stop)
	streams := make([]*sseStream, 200)
	var wg sync.WaitGroup
	for i := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			streams[i] = &sseStream{room: "r"}
			assert.True(t, h.add(streams[i]))
		}()
	}
	wg.Wait()
	require.Eventually(t, func() bool { return f.count("r") >= 3 }, 5*time.Second, time.Millisecond)
	assert.EqualValues(t, 1, f.most.Load(), "one reader for the room")
	walks, changed := w.count()
	assert.Zero(t, changed, "no change told without one")
	assert.GreaterOrEqual(t, walks, 2*f.count("r")-2, "walked every step (5 ms), read every interval (40 ms)")

	f.mu.Lock()
	f.state = issuer.RoomPaused
	f.mu.Unlock()
	h.poke("r")
	require.Eventually(t, func() bool { _, c := w.count(); return c == 1 }, 5*time.Second, time.Millisecond)
	w.mu.Lock()
	assert.Equal(t, issuer.RoomPaused, w.changed[0].State)
	assert.Equal(t, 200, w.sizes[len(w.sizes)-1], "the change's walk holds every stream")
	w.mu.Unlock()
	assert.Equal(t, issuer.RoomPaused, h.current("r").State)
	assert.Nil(t, h.current("other"), "no feed, no news")

	for _, st := range streams {
		h.remove(st)
	}
	require.Eventually(t, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.rooms) == 0
	}, 5*time.Second, time.Millisecond, "the reader ends with the last stream")
	n := f.count("r")
	time.Sleep(5 * h.every)
	assert.Equal(t, n, f.count("r"), "no reads without streams")

	st := &sseStream{room: "r"}
	require.True(t, h.add(st))
	require.Eventually(t, func() bool { return f.count("r") > n }, 5*time.Second, time.Millisecond, "a new stream, a new reader")
	h.remove(st)
}

// TestNewsHubStopping: once the server stops, no stream is added.
func TestNewsHubStopping(t *testing.T) {
	stop := make(chan struct{})
	h := newNewsHub(&fakeNews{reads: map[string]int{}}, &fakeWalker{}, time.Second, stop)
	close(stop)
	assert.False(t, h.add(&sseStream{room: "r"}))
	assert.Empty(t, h.all())
}
