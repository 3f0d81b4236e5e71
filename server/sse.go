package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/problem"
)

// SSEHeartbeat is how often an event stream that has sent nothing for that
// long gets a comment line (": hb"): idle proxies and load balancers keep the
// connection, and a client that has gone away is noticed when the write
// fails. (Clients that close their TCP connection are noticed at once, see
// watchPeer.)
const SSEHeartbeat = 15 * time.Second

// GET /v1/rooms/:room/events: server-sent events. The first "status" event
// is sent at once; while the entry is WAITING another follows every
// poll_after (the issuer's jittered hint), and a ": hb" comment every
// SSEHeartbeat in between. The stream ends after the first event whose state
// is not WAITING, after MaxStream, on shutdown, or when the client goes away.
// A failure mid-stream is sent as a "problem" event (the problem document)
// and ends the stream.
//
// The room's streams on a replica follow its news (roomnews.go): one reader
// per room reads the room's snapshot and config every RoomNewsInterval (two
// Redis commands, however many streams), every stream gets a status event at
// once when the room's state, page_message, close reason or opening time
// changes (the event carries page_message), and a stream's periodic place
// comes from that read for users far behind the head, from the exact script
// for users near it, so an admission is seen at the next poll.
//
// EventSource reconnects when a stream ends: clients should close it when
// they see a final state. Each event carries "retry:" = poll_after_ms.
//
// Limits (streamlimit.go, per replica): a (room, user) holds at most
// Options.StreamsPerUser open streams, and a new one ends the oldest with a
// final "replaced" event (retry: ReplacedRetry); a client address holds at
// most Options.StreamsPerAddress, and one more is refused 429 rate_limited;
// the replica holds at most Options.MaxStreams, and one more (not replacing
// one of the same user's) is refused 429 rate_limited too. The waiting page
// then polls status. Every open also counts against the user's status budget
// (Options.StatusPerUser, shared with GET status): an open runs a status.
func (s *Server) events(c *fiber.Ctx) error {
	u, err := s.user(c)
	if err != nil {
		return err
	}
	// The stream (and the Entry it holds) outlives the handler: room, u and
	// tok are copies (param, header, query).
	room, tok := param(c, "room"), waitingToken(c)
	e, err := s.is.Status(c.UserContext(), room, u, tok)
	if err != nil {
		return err
	}
	// Only a verified (room, user, token) takes a place, so a bad token
	// cannot end the user's streams.
	addr := ""
	if s.streams.perAddr > 0 {
		addr = s.addrKey(c) // the client address's prefix (clientaddr.go), a fresh string
	}
	slot, evicted, refused := s.streams.acquire(room, u, addr)
	switch refused {
	case streamAddressLimit:
		s.m.sseLimited(sseAddressLimit)
		p := problemFor(problem.RateLimited, "too many open event streams from this client address "+
			"(at most "+strconv.Itoa(s.streams.perAddr)+" per replica); poll status instead")
		p.kind.RetryAfter = int(ReplacedRetry / time.Second)
		return p
	case streamReplicaLimit:
		s.m.sseLimited(sseReplicaLimit)
		p := problemFor(problem.RateLimited, "this replica holds its most open event streams "+
			"("+strconv.Itoa(s.streams.total)+"); poll status instead")
		p.kind.RetryAfter = int(ReplacedRetry / time.Second)
		return p
	}
	if evicted {
		s.m.sseLimited(sseReplaced)
	}
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	conn := c.Context().Conn()
	if s.sseNoWatch || !watchable(conn) {
		conn = nil
	} else {
		// Nothing else is read from this connection: the watcher owns its
		// read side until fasthttp closes it after the stream.
		c.Context().SetConnectionClose()
	}
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) { s.stream(w, conn, slot, room, u, tok, e) })
	return nil
}

func (s *Server) heartbeat() time.Duration {
	if s.sseHeartbeat > 0 {
		return s.sseHeartbeat
	}
	return SSEHeartbeat
}

// stream runs in fasthttp's body-stream goroutine, which starts as soon as
// the handler sets it (fasthttp.NewStreamReader), so slot is always
// released.
func (s *Server) stream(w *bufio.Writer, conn net.Conn, slot *streamSlot, room, user, tok string, e *issuer.Entry) {
	defer s.streams.release(slot)
	s.m.sseOpen.Inc()
	defer s.m.sseOpen.Dec()
	var gone <-chan struct{}
	if conn != nil {
		gone = watchPeer(conn)
	}
	hb := s.heartbeat()
	end := time.NewTimer(s.sseMax)
	defer end.Stop()
	next := time.NewTimer(time.Hour)
	defer next.Stop()
	beat := time.NewTicker(hb)
	defer beat.Stop()
	var sub *newsSub // the room's news (roomnews.go): state changes at once, places without Redis
	var changed <-chan struct{}
	if s.news != nil {
		sub = s.news.subscribe(room)
		defer s.news.unsubscribe(sub)
		changed = sub.changed
	}
	for {
		wait := e.PollAfter
		if s.sseInterval > 0 {
			wait = s.sseInterval
		}
		if writeEvent(w, "status", s.streamEvent(e, sub), wait) != nil || e.State != flashgate.StateWaiting {
			return
		}
		next.Reset(wait)
		beat.Reset(hb) // heartbeats only on a stream idle for hb
	idle:
		for {
			select {
			case <-next.C:
				break idle
			case <-changed:
				break idle
			case <-beat.C:
				if writeHeartbeat(w) != nil {
					return
				}
			case <-gone:
				return
			case <-s.stopping:
				return
			case <-end.C:
				return
			case <-slot.replaced:
				_ = writeEvent(w, "replaced", replacedEvent{Reason: "replaced", MaxStreams: s.streams.perUser,
					Detail: "a newer event stream of this user in this room replaced this one; " +
						"poll status, or reconnect after retry ms (which replaces the oldest in turn)"}, ReplacedRetry)
				return
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		nx, err := s.streamStatus(ctx, sub, room, user, tok)
		cancel()
		if err != nil {
			p := toProblem(err)
			s.m.storeError(p.Code)
			if logged(p) {
				s.log.Warn("event stream: status failed", "room", clipLog(room), "err", p.cause)
			}
			p.Instance = "/v1/rooms/" + room + "/events"
			_ = writeEvent(w, "problem", p, 0)
			return
		}
		e = nx
	}
}

// replacedEvent is the data of the final "replaced" event.
type replacedEvent struct {
	Reason     string `json:"reason"`      // "replaced"
	MaxStreams int    `json:"max_streams"` // Options.StreamsPerUser
	Detail     string `json:"detail"`
}

// watchable reports whether conn is a real network connection whose read
// side watchPeer may take over (not, e.g., app.Test's in-memory one).
func watchable(conn net.Conn) bool {
	switch conn.(type) {
	case *net.TCPConn, *net.UnixConn, *tls.Conn:
		return true
	}
	return false
}

// watchPeer reads conn until the client closes it (EOF, reset) and then
// closes the returned channel, so a stream ends as soon as its client goes
// rather than at a later write: through fasthttp's body-stream pipe, a write
// to a closed connection fails only at the second or third heartbeat after
// the close. Bytes the client sends meanwhile are discarded (the response
// closes the connection). The goroutine ends when fasthttp closes conn after
// the stream. If a read deadline set by someone else expires, it gives up
// and leaves the heartbeat to notice.
func watchPeer(conn net.Conn) <-chan struct{} {
	gone := make(chan struct{})
	_ = conn.SetReadDeadline(time.Time{}) // fasthttp's header/body read timeouts
	go func() {
		var b [16]byte
		for {
			if _, err := conn.Read(b[:]); err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					return
				}
				close(gone)
				return
			}
		}
	}()
	return gone
}

// writeHeartbeat writes and flushes an SSE comment; an error means the
// client has gone away.
func writeHeartbeat(w *bufio.Writer) error {
	w.WriteString(": hb\n\n")
	return w.Flush()
}

// writeEvent writes one SSE event and flushes it; an error means the
// client has gone away.
func writeEvent(w *bufio.Writer, event string, v any, retry time.Duration) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.WriteString("event: ")
	w.WriteString(event)
	w.WriteString("\n")
	if retry > 0 {
		w.WriteString("retry: ")
		w.WriteString(strconv.FormatInt(retry.Milliseconds(), 10))
		w.WriteString("\n")
	}
	w.WriteString("data: ")
	w.Write(data) // JSON from encoding/json has no raw newlines
	w.WriteString("\n\n")
	return w.Flush()
}
