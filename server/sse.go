package server

import (
	"bufio"
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
)

// GET /v1/rooms/:room/events: server-sent events. The first "status" event
// is sent at once; while the entry is WAITING another follows every
// poll_after (the issuer's jittered hint). The stream ends after the first
// event whose state is not WAITING, after MaxStream, on shutdown, or when the
// client goes away. A failure mid-stream is sent as a "problem" event (the
// problem document) and ends the stream.
//
// EventSource reconnects when a stream ends: clients should close it when
// they see a final state. Each event carries "retry:" = poll_after_ms.
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
	c.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) { s.stream(w, room, u, tok, e) })
	return nil
}

func (s *Server) stream(w *bufio.Writer, room, user, tok string, e *issuer.Entry) {
	s.m.sseOpen.Inc()
	defer s.m.sseOpen.Dec()
	end := time.NewTimer(s.sseMax)
	defer end.Stop()
	for {
		wait := e.PollAfter
		if s.sseInterval > 0 {
			wait = s.sseInterval
		}
		if writeEvent(w, "status", entryJSON(e), wait) != nil || e.State != flashgate.StateWaiting {
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-s.stopping:
			t.Stop()
			return
		case <-end.C:
			t.Stop()
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		next, err := s.is.Status(ctx, room, user, tok)
		cancel()
		if err != nil {
			p := toProblem(err)
			s.m.storeError(p.Code)
			if logged(p) {
				s.log.Warn("event stream: status failed", "room", room, "err", p.cause)
			}
			p.Instance = "/v1/rooms/" + room + "/events"
			_ = writeEvent(w, "problem", p, 0)
			return
		}
		e = next
	}
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
