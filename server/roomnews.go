package server

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flashgate/flashgate/issuer"
)

// RoomNewsInterval is how often a replica reads the news of a room that
// has open event streams on it (issue 34 §2): one reader per room and
// replica, two Redis commands a read however many streams follow the room,
// so a state change (pause, open, stop, sold out, close, an edited
// page_message) reaches every stream of the room within about one interval
// (at once on the replica whose admin API made it).
const RoomNewsInterval = time.Second

// maxStreamStep is the longest a room's feed waits between two walks of its
// streams: a stream's next status event or heartbeat is sent at most this
// late.
const maxStreamStep = 250 * time.Millisecond

// roomNewsReader is what the fan-out needs of the issuer: Queue's News and
// StatusFrom.
type roomNewsReader interface {
	News(ctx context.Context, room string, every time.Duration) (*issuer.RoomNews, error)
	StatusFrom(ctx context.Context, n *issuer.RoomNews, room, user, waitingToken string) (*issuer.Entry, bool, error)
}

// streamWalker is what a feed does with its streams at each walk (the
// Server's walk, sse.go): send what is due. n is the feed's news while
// fresh (nil: ask the exact script); changed reports that the news changed
// in what a page shows at once since the last walk, so that every stream
// is due.
type streamWalker interface {
	walk(f *roomFeed, streams []*sseStream, n *issuer.RoomNews, changed bool)
	// step is how often a feed walks its streams (at most maxStreamStep).
	step() time.Duration
}

// newsHub holds a replica's room feeds: one per room with open streams,
// each run by one goroutine (run) that reads the room's news every interval,
// walks the room's streams every step, and ends with the room's last stream.
// A stream itself has no goroutine of its own but the one that notices its
// client leave (sse.go).
type newsHub struct {
	read     roomNewsReader
	walker   streamWalker
	every    time.Duration
	stopping <-chan struct{}
	mu       sync.Mutex
	rooms    map[string]*roomFeed
	reads    atomic.Int64 // news reads, all rooms (tests)
}

// roomFeed is one room's news and the streams that follow it.
type roomFeed struct {
	room    string
	news    atomic.Pointer[issuer.RoomNews] // the last read (nil before the first)
	streams map[*sseStream]struct{}         // under newsHub.mu
	poke    chan struct{}                   // cap 1: read now
	list    []*sseStream                    // run's copy of streams (reused)
}

func newNewsHub(r roomNewsReader, w streamWalker, every time.Duration, stopping <-chan struct{}) *newsHub {
	return &newsHub{read: r, walker: w, every: every, stopping: stopping, rooms: map[string]*roomFeed{}}
}

// current is room's last news while fresh, without following the room (nil
// when the room has no feed here or its news is stale).
func (h *newsHub) current(room string) *issuer.RoomNews {
	h.mu.Lock()
	f := h.rooms[room]
	h.mu.Unlock()
	if f == nil {
		return nil
	}
	return f.latest(h.every)
}

// add makes st follow its room's feed, starting the feed if needed.
// It reports false (and adds nothing) once the server is stopping.
func (h *newsHub) add(st *sseStream) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.stopping:
		return false
	default:
	}
	f := h.rooms[st.room]
	if f == nil {
		f = &roomFeed{room: strings.Clone(st.room), streams: map[*sseStream]struct{}{}, poke: make(chan struct{}, 1)}
		h.rooms[f.room] = f
		go h.run(f)
	}
	st.feed = f
	f.streams[st] = struct{}{}
	return true
}

// remove takes st off its feed (no-op when it is on none).
func (h *newsHub) remove(st *sseStream) {
	h.mu.Lock()
	if st.feed != nil {
		delete(st.feed.streams, st)
	}
	h.mu.Unlock()
}

// all returns every stream on every feed (Shutdown).
func (h *newsHub) all() []*sseStream {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*sseStream
	for _, f := range h.rooms {
		for st := range f.streams {
			out = append(out, st)
		}
	}
	return out
}

// poke makes room's reader (if it has one) read at once: the admin API on
// this replica changed the room.
func (h *newsHub) poke(room string) {
	h.mu.Lock()
	f := h.rooms[room]
	h.mu.Unlock()
	if f != nil {
		select {
		case f.poke <- struct{}{}:
		default:
		}
	}
}

// latest is the feed's last news while it is fresh (younger than three
// intervals), else nil: the stream then asks the exact script.
func (f *roomFeed) latest(every time.Duration) *issuer.RoomNews {
	n := f.news.Load()
	if n == nil || time.Since(n.At) > 3*every {
		return nil
	}
	return n
}

// run reads f's news every interval (or when poked) and walks f's streams
// every step until f has no streams or the server stops.
func (h *newsHub) run(f *roomFeed) {
	var last time.Time // of the last news read
	poked := false
	for {
		changed := false
		if poked || time.Since(last) >= h.every {
			last = time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), max(h.every, time.Second))
			n, err := h.read.News(ctx, f.room, h.every)
			cancel()
			h.reads.Add(1)
			if err == nil { // a failed read leaves the last news to age (latest)
				// The first read changes nothing: each stream's first event
				// came from its own status call just before.
				old := f.news.Swap(n)
				changed = old != nil && n.Changed(old)
			}
		}
		h.mu.Lock()
		if len(f.streams) == 0 {
			delete(h.rooms, f.room)
			h.mu.Unlock()
			return
		}
		f.list = f.list[:0]
		for st := range f.streams {
			f.list = append(f.list, st)
		}
		h.mu.Unlock()
		h.walker.walk(f, f.list, f.latest(h.every), changed)
		clear(f.list) // hold no ended stream until the next walk
		t := time.NewTimer(min(h.walker.step(), h.every, maxStreamStep))
		poked = false
		select {
		case <-t.C:
		case <-f.poke:
			poked = true
		case <-h.stopping:
			t.Stop()
			return
		}
		t.Stop()
	}
}

// streamEntry is a stream's status event: the entry, and the room's
// page_message while the room has news (wait.js replaces its message area
// when it differs; "" clears it). appendStatusEvent writes it.
type streamEntry struct {
	Entry
	PageMessage *string `json:"page_message,omitempty"`
}

// newsPoke (a handler of the admin routes that change a room's state or
// page) makes the room's news reader on this replica read at once after a
// successful change, so its streams see it without waiting for the interval.
func (s *Server) newsPoke(c *fiber.Ctx) error {
	err := c.Next()
	if err == nil && s.news != nil && c.Response().StatusCode() < 300 {
		s.news.poke(param(c, "room"))
	}
	return err
}
