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

// roomNewsReader is what the fan-out needs of the issuer: Queue's News and
// StatusFrom.
type roomNewsReader interface {
	News(ctx context.Context, room string, every time.Duration) (*issuer.RoomNews, error)
	StatusFrom(ctx context.Context, n *issuer.RoomNews, room, user, waitingToken string) (*issuer.Entry, bool, error)
}

// newsHub holds a replica's room feeds: one per room with open streams,
// each read by one goroutine (run) that ends with the room's last stream.
type newsHub struct {
	read     roomNewsReader
	every    time.Duration
	stopping <-chan struct{}
	mu       sync.Mutex
	rooms    map[string]*roomFeed
	reads    atomic.Int64 // news reads, all rooms (tests)
}

// roomFeed is one room's news and the streams that follow it.
type roomFeed struct {
	room string
	news atomic.Pointer[issuer.RoomNews] // the last read (nil before the first)
	subs map[*newsSub]struct{}           // under newsHub.mu
	poke chan struct{}                   // cap 1: read now
}

// newsSub is one stream's subscription: changed gets a value (coalesced)
// when the room's news changed in what a page shows at once.
type newsSub struct {
	feed    *roomFeed
	changed chan struct{}
}

func newNewsHub(r roomNewsReader, every time.Duration, stopping <-chan struct{}) *newsHub {
	return &newsHub{read: r, every: every, stopping: stopping, rooms: map[string]*roomFeed{}}
}

// subscribe adds a stream to room's feed, starting its reader if needed.
func (h *newsHub) subscribe(room string) *newsSub {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.rooms[room]
	if f == nil {
		f = &roomFeed{room: strings.Clone(room), subs: map[*newsSub]struct{}{}, poke: make(chan struct{}, 1)}
		h.rooms[f.room] = f
		go h.run(f)
	}
	sub := &newsSub{feed: f, changed: make(chan struct{}, 1)}
	f.subs[sub] = struct{}{}
	return sub
}

func (h *newsHub) unsubscribe(sub *newsSub) {
	h.mu.Lock()
	delete(sub.feed.subs, sub)
	h.mu.Unlock()
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
func (sub *newsSub) latest(every time.Duration) *issuer.RoomNews {
	n := sub.feed.news.Load()
	if n == nil || time.Since(n.At) > 3*every {
		return nil
	}
	return n
}

// run reads f's news every interval (or when poked) until f has no streams
// or the server stops, and wakes every stream when the news changed.
func (h *newsHub) run(f *roomFeed) {
	t := time.NewTicker(h.every)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), max(h.every, time.Second))
		n, err := h.read.News(ctx, f.room, h.every)
		cancel()
		h.reads.Add(1)
		changed := false
		if err == nil { // a failed read leaves the last news to age (latest)
			// The first read wakes nobody: each stream's first event came
			// from its own status call just before.
			old := f.news.Swap(n)
			changed = old != nil && n.Changed(old)
		}
		h.mu.Lock()
		if len(f.subs) == 0 {
			delete(h.rooms, f.room)
			h.mu.Unlock()
			return
		}
		if changed {
			for sub := range f.subs {
				select {
				case sub.changed <- struct{}{}:
				default:
				}
			}
		}
		h.mu.Unlock()
		select {
		case <-t.C:
		case <-f.poke:
		case <-h.stopping:
			return
		}
	}
}

// streamEntry is a stream's status event: the entry, and the room's
// page_message while the stream follows the room's news (wait.js replaces
// its message area when it differs; "" clears it).
type streamEntry struct {
	Entry
	PageMessage *string `json:"page_message,omitempty"`
}

// streamEvent is e's event for a stream (sub nil: not following news).
func (s *Server) streamEvent(e *issuer.Entry, sub *newsSub) any {
	if sub == nil {
		return entryJSON(e)
	}
	out := streamEntry{Entry: entryJSON(e)}
	if n := sub.feed.news.Load(); n != nil {
		msg := n.PageMessage
		out.PageMessage = &msg
	}
	return out
}

// streamStatus is a stream's next entry: placed from the room's news where
// it can be (no Redis call), by the exact script where it cannot.
func (s *Server) streamStatus(ctx context.Context, sub *newsSub, room, user, tok string) (*issuer.Entry, error) {
	if sub == nil {
		return s.is.Status(ctx, room, user, tok)
	}
	e, _, err := s.news.read.StatusFrom(ctx, sub.latest(s.news.every), room, user, tok)
	return e, err
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
