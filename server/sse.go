package server

import (
	"context"
	"encoding/json"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/problem"
)

// SSEHeartbeat is how often an event stream that has sent nothing for that
// long gets a comment line (": hb"): idle proxies and load balancers keep the
// connection, and a client that has gone away is noticed when the write
// fails. (Clients that close their TCP connection are noticed at once, see
// watch.)
const SSEHeartbeat = 15 * time.Second

// streamWriteTimeout bounds one write to an event stream. Events are a few
// hundred bytes and a write returns at once while the kernel's send buffer
// has room; a write that waits means a client that has not read for tens of
// kilobytes, and the stream is ended rather than let it hold up the room's
// other streams (the room's feed writes them in turn).
const streamWriteTimeout = 50 * time.Millisecond

// streamWorkers is how many goroutines a feed's walk places and writes its
// due streams with, at most (for the walk only).
const streamWorkers = 32

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
// A stream is cheap to hold (issue 34 §1): after its first event the
// handler hands the connection over (fasthttp's hijack), fasthttp's
// goroutine and buffers are freed, and the room's feed writes the stream's
// events and heartbeats (chunked, straight to the connection) at its walks.
// What stays per stream is the connection, a small record, and one
// goroutine blocked reading the connection, which notices at once a client
// that closes it (watch).
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
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	ctx := c.Context()
	conn := ctx.Conn()
	if !networkConn(conn) {
		// An in-process connection (fiber's app.Test): the first event is
		// the whole stream.
		c.Response().SetBodyRaw(appendStatusEvent(nil, e, s.news.current(room), s.streamWait(e)))
		return nil
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
	if evicted != nil {
		s.m.sseLimited(sseReplaced)
		s.replace(evicted)
	}
	// HTTP/1.0 has no chunked coding (RFC 9112 §6.1): its body is
	// everything until the close.
	st := &sseStream{conn: conn, slot: slot, room: room, user: u, tok: tok, chunked: ctx.Request.Header.IsHTTP11()}
	// fasthttp writes nothing and hands the connection over once the
	// handler chain has returned (so that every middleware's headers are
	// in the response header open writes).
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(net.Conn) { s.open(ctx, st, e) })
	return nil
}

// networkConn reports whether conn is a network connection a stream can be
// handed: a TCP one has a port of its own (fiber's in-memory test
// connection has port 0), a Unix socket's is one too.
func networkConn(conn net.Conn) bool {
	if conn == nil {
		return false
	}
	switch a := conn.LocalAddr().(type) {
	case *net.TCPAddr:
		return a.Port != 0
	case *net.UnixAddr:
		return true
	}
	return false
}

// sseStream is one open event stream after its first event: what its room's
// feed needs to place and write it.
type sseStream struct {
	conn             net.Conn
	slot             *streamSlot
	room, user, tok  string
	chunked          bool      // the body is chunked (HTTP/1.1), else identity until the close (HTTP/1.0)
	feed             *roomFeed // under newsHub.mu
	due, beat, until time.Time // the next status event, heartbeat and the end (MaxStream); the feed's only
	mu               sync.Mutex
	done             bool // under mu: ended, the connection closed
}

func (s *Server) heartbeat() time.Duration {
	if s.sseHeartbeat > 0 {
		return s.sseHeartbeat
	}
	return SSEHeartbeat
}

// streamWait is the time to e's next status event (poll_after).
func (s *Server) streamWait(e *issuer.Entry) time.Duration {
	if s.sseInterval > 0 {
		return s.sseInterval
	}
	return e.PollAfter
}

// step is how often a room's feed walks its streams (streamWalker).
func (s *Server) step() time.Duration {
	d := s.heartbeat()
	if s.sseInterval > 0 {
		d = min(d, s.sseInterval)
	}
	return max(d, 5*time.Millisecond)
}

// open runs in the goroutine fasthttp hands the connection to, once the
// handler chain returned: it writes the response header and the first
// event, and then leaves the stream to its room's feed and to watch.
// fasthttp keeps the connection open after it returns (KeepHijackedConns):
// finish closes it.
func (s *Server) open(ctx *fasthttp.RequestCtx, st *sseStream, e *issuer.Entry) {
	s.m.sseOpen.Inc()
	watch := !s.sseNoWatch
	h := &ctx.Response.Header
	if st.chunked {
		h.SetContentLength(-1) // chunked: a client tells the stream's end from a cut
	} else {
		// No length and no transfer coding: the body ends with the
		// connection (fasthttp's -2 would write the obsolete
		// "Transfer-Encoding: identity", which clients refuse).
		h.SetContentLength(-1)
		h.Del(fiber.HeaderTransferEncoding)
	}
	h.SetConnectionClose()
	b := h.AppendBytes(nil)
	b = st.frame(b, appendStatusEvent(nil, e, s.news.current(st.room), s.streamWait(e)))
	now := time.Now()
	st.due, st.beat, st.until = now.Add(s.streamWait(e)), now.Add(s.heartbeat()), now.Add(s.sseMax)
	_ = st.conn.SetWriteDeadline(now.Add(5 * time.Second))
	if _, err := st.conn.Write(b); err != nil || e.State != flashgate.StateWaiting {
		s.finish(st, nil) // the body's end
		return
	}
	if !s.news.add(st) { // shutting down
		s.finish(st, nil)
		return
	}
	st.slot.mu.Lock()
	replaced := st.slot.replaced
	st.slot.st = st
	st.slot.mu.Unlock()
	if replaced {
		s.finish(st, s.replacedEvent())
		return
	}
	if watch {
		go s.watch(st)
	}
}

// watch reads st's connection until the client closes it (EOF, reset) or
// finish does, then ends the stream: a client that goes away is noticed at
// once, not at a later write. Bytes the client sends meanwhile are
// discarded (the response closes the connection). This is the one
// goroutine an open stream holds.
func (s *Server) watch(st *sseStream) {
	_ = st.conn.SetReadDeadline(time.Time{}) // fasthttp's header/body read timeouts
	var b [1]byte
	for {
		if _, err := st.conn.Read(b[:]); err != nil {
			break
		}
	}
	s.finish(st, nil)
}

// replace ends the stream of a slot a newer stream of its (room, user) took
// the place of (streamLimits.acquire's evicted), or has it ended as soon as
// it runs.
func (s *Server) replace(slot *streamSlot) {
	slot.mu.Lock()
	slot.replaced = true
	st := slot.st
	slot.mu.Unlock()
	if st != nil {
		s.finish(st, s.replacedEvent())
	}
}

func (s *Server) replacedEvent() []byte {
	return appendEvent(nil, "replaced", replacedEvent{Reason: "replaced", MaxStreams: s.streams.perUser,
		Detail: "a newer event stream of this user in this room replaced this one; " +
			"poll status, or reconnect after retry ms (which replaces the oldest in turn)"}, ReplacedRetry)
}

// finish ends st once: writes last (an event, or nil) and the response's
// end, closes the connection, and gives back its feed place, its stream
// limits and the gauge. Any goroutine may call it.
func (s *Server) finish(st *sseStream, last []byte) {
	st.mu.Lock()
	if st.done {
		st.mu.Unlock()
		return
	}
	st.done = true
	_ = st.conn.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	_, _ = st.conn.Write(st.end(st.frame(nil, last)))
	_ = st.conn.Close()
	st.mu.Unlock()
	s.news.remove(st)
	s.streams.release(st.slot)
	s.m.sseOpen.Dec()
}

// send writes b (whole chunks) to st; an error (the client gone, or not
// reading) ends the stream.
func (s *Server) send(st *sseStream, b []byte) bool {
	st.mu.Lock()
	if st.done {
		st.mu.Unlock()
		return false
	}
	_ = st.conn.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	_, err := st.conn.Write(b)
	st.mu.Unlock()
	if err != nil {
		s.finish(st, nil)
		return false
	}
	return true
}

// endStreams ends every open stream (Shutdown): fasthttp does not wait for
// connections it handed over.
func (s *Server) endStreams() {
	for _, st := range s.news.all() {
		s.finish(st, nil)
	}
}

// walk is a room feed's turn at its streams (streamWalker): every stream
// whose time is up ends, every one due (or all, when the room's news
// changed) is placed again and sent its status event, and every one idle
// for a heartbeat gets one.
func (s *Server) walk(f *roomFeed, streams []*sseStream, n *issuer.RoomNews, changed bool) {
	now := time.Now()
	due := streams[:0] // f.list's backing array: walk runs in f's goroutine
	for _, st := range streams {
		switch {
		case !now.Before(st.until):
			s.finish(st, nil)
		case changed || !now.Before(st.due):
			due = append(due, st)
		case !now.Before(st.beat):
			if s.send(st, st.frame(nil, heartbeat)) {
				st.beat = now.Add(s.heartbeat())
			}
		}
	}
	if len(due) == 0 {
		return
	}
	msg := f.news.Load() // page_message: the last news, however old
	workers := min(streamWorkers, len(due))
	if workers == 1 {
		s.place(due[0], n, msg, nil)
		return
	}
	// Concurrent, so that the exact answers of those near the head go to
	// Redis together (issuer.Queue coalesces a room's status calls).
	var wg sync.WaitGroup
	var next atomic.Int64
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for i := next.Add(1) - 1; i < int64(len(due)); i = next.Add(1) - 1 {
				buf = s.place(due[i], n, msg, buf)
			}
		}()
	}
	wg.Wait()
}

// place sends st its next status event, placed from n where n can place
// it (issuer.Queue.StatusFrom), and ends it when its entry left WAITING
// (after the event) or its status failed (a "problem" event). buf is
// scratch space, returned for reuse.
func (s *Server) place(st *sseStream, n, msg *issuer.RoomNews, buf []byte) []byte {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	e, _, err := s.news.read.StatusFrom(ctx, n, st.room, st.user, st.tok)
	cancel()
	if err != nil {
		p := toProblem(err)
		s.m.storeError(p.Code)
		if logged(p) {
			s.log.Warn("event stream: status failed", "room", clipLog(st.room), "err", p.cause)
		}
		p.Instance = "/v1/rooms/" + st.room + "/events"
		s.finish(st, appendEvent(nil, "problem", p, 0))
		return buf
	}
	wait := s.streamWait(e)
	ev := appendStatusEvent(nil, e, msg, wait)
	if e.State != flashgate.StateWaiting {
		s.finish(st, ev)
		return buf
	}
	buf = st.frame(buf[:0], ev)
	if s.send(st, buf) {
		now := time.Now()
		st.due, st.beat = now.Add(wait), now.Add(s.heartbeat())
	}
	return buf
}

// replacedEvent is the data of the final "replaced" event.
type replacedEvent struct {
	Reason     string `json:"reason"`      // "replaced"
	MaxStreams int    `json:"max_streams"` // Options.StreamsPerUser
	Detail     string `json:"detail"`
}

// heartbeat is the SSE comment an idle stream gets every heartbeat.
var heartbeat = []byte(": hb\n\n")

// frame appends data to dst as the body's next part: one chunk (RFC 9112
// §7.1) when the body is chunked, as it is otherwise. Nothing when data is
// empty.
func (st *sseStream) frame(dst, data []byte) []byte {
	if len(data) == 0 {
		return dst
	}
	if !st.chunked {
		return append(dst, data...)
	}
	dst = strconv.AppendInt(dst, int64(len(data)), 16)
	dst = append(dst, "\r\n"...)
	dst = append(dst, data...)
	return append(dst, "\r\n"...)
}

// end appends the body's end: the last chunk when chunked (the close ends
// an identity body).
func (st *sseStream) end(dst []byte) []byte {
	if !st.chunked {
		return dst
	}
	return append(dst, "0\r\n\r\n"...)
}

// appendStatusEvent appends the "status" event of e for a stream of a room
// whose news is n (nil: none yet): appendEvent of streamEvent(e, n), byte
// for byte, without encoding/json's reflection (jsonenc.go's encoder: a
// stream's events are most of its CPU).
func appendStatusEvent(dst []byte, e *issuer.Entry, n *issuer.RoomNews, retry time.Duration) []byte {
	dst = append(dst, "event: status\n"...)
	if retry > 0 {
		dst = append(dst, "retry: "...)
		dst = strconv.AppendInt(dst, retry.Milliseconds(), 10)
		dst = append(dst, '\n')
	}
	dst = append(dst, "data: "...)
	var ms [2]int64
	ent := entryWith(e, &ms)
	dst = ent.appendJSON(dst)
	if n != nil { // streamEntry's page_message, after the Entry's members
		dst = append(dst[:len(dst)-1], `,"page_message":`...)
		dst = appendJSONString(dst, n.PageMessage)
		dst = append(dst, '}')
	}
	return append(dst, "\n\n"...)
}

// appendEvent appends one SSE event: its name, retry: (when retry > 0, in
// ms) and v as JSON on one data: line.
func appendEvent(dst []byte, event string, v any, retry time.Duration) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		data = []byte(`{}`)
	}
	dst = append(dst, "event: "...)
	dst = append(dst, event...)
	dst = append(dst, '\n')
	if retry > 0 {
		dst = append(dst, "retry: "...)
		dst = strconv.AppendInt(dst, retry.Milliseconds(), 10)
		dst = append(dst, '\n')
	}
	dst = append(dst, "data: "...)
	dst = append(dst, data...) // JSON from encoding/json has no raw newlines
	return append(dst, "\n\n"...)
}
