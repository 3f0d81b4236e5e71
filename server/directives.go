package server

import (
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
)

// directiveCacheTTL is how long a replica reuses the directive document it
// read from Redis (fg:directives): well under the document's max-age, so a
// stop made through another replica adds at most this much to the edge's
// delay; a stop through this replica clears it at once.
const directiveCacheTTL = 500 * time.Millisecond

// directiveCache is the replica's copy of the edge directive document.
type directiveCache struct {
	maxAge int64 // Cache-Control max-age, seconds

	mu  sync.Mutex // held while the document is read: one Redis read in flight
	doc []byte
	at  time.Time
}

// directiveDoc is the edge directive document: per room, not_before in
// Unix seconds (the unit of the token's iat). verifier/remote.Directives,
// js/flashgate-verifier (directivesUrl) and the example worker read it.
type directiveDoc struct {
	Rooms map[string]roomDirective `json:"rooms"`
}

type roomDirective struct {
	NotBefore int64 `json:"not_before"`
}

// GET /.well-known/flashgate-directives.json: every room's not_before
// (issuer.Directives), Cache-Control: public, max-age=Options.DirectiveMaxAge.
// Redis down answers 503 (problem unavailable), never an empty document:
// verifiers keep their last document instead (never fail open).
func (s *Server) directivesDoc(c *fiber.Ctx) error {
	d := &s.directives
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.doc == nil || time.Since(d.at) >= directiveCacheTTL {
		m, err := s.is.Directives(c.UserContext())
		if err != nil {
			return err
		}
		doc := directiveDoc{Rooms: make(map[string]roomDirective, len(m))}
		for room, nb := range m {
			doc.Rooms[room] = roomDirective{nb}
		}
		b, err := json.Marshal(doc)
		if err != nil {
			return err
		}
		d.doc, d.at = b, time.Now()
	}
	c.Set(fiber.HeaderCacheControl, "public, max-age="+strconv.FormatInt(d.maxAge, 10))
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(d.doc)
}

// forget drops the cached document (after a stop through this replica).
func (d *directiveCache) forget() {
	d.mu.Lock()
	d.doc = nil
	d.mu.Unlock()
}

// StopResponse is the answer of POST /admin/rooms/:room/stop.
type StopResponse struct {
	Room string `json:"room"`
	// NotBefore is the room's not_before, Unix seconds like the token's iat
	// it is compared with (docs/http-api.md#units): admissions issued
	// before it are refused at completion now and at the edge within
	// EdgeMaxAgeMs plus one fetch.
	NotBefore int64 `json:"not_before"`
	// Paused: the stop paused the room (it was open).
	Paused bool `json:"paused"`
	// State is the room's configured state after the stop.
	State string `json:"state"`
	// EdgeMaxAgeMs is the directive document's max-age, ms (whole
	// seconds); EdgeMaxAgeS, the same in seconds, is its deprecated old
	// name, emitted for one release.
	EdgeMaxAgeMs int64 `json:"edge_max_age_ms"`
	EdgeMaxAgeS  int64 `json:"edge_max_age_s"`
}

// POST /admin/rooms/:room/stop: issuer.Stop — refuse every admission issued
// up to now, pausing the room if it is open.
func (s *Server) adminStop(c *fiber.Ctx) error {
	room := param(c, "room")
	r, err := s.is.Stop(c.UserContext(), room)
	if err != nil {
		return err
	}
	s.directives.forget()
	return c.JSON(StopResponse{Room: room, NotBefore: r.NotBefore.Unix(), Paused: r.Paused,
		State: string(r.Config.State), EdgeMaxAgeMs: s.directives.maxAge * 1000, EdgeMaxAgeS: s.directives.maxAge})
}
