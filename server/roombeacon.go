package server

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flashgate/flashgate"
)

// The room beacon (docs/browser.md#the-room-beacon): GET
// /v1/rooms/{room}/beacon answers every buyer of a room the same small
// signed document (issuer.Queue.RoomBeacon), cacheable by a CDN, from which
// a waiting page places itself with its own arrival number. This replica
// reads it from Redis at most once per BeaconMaxAge per room, however many
// requests come (one script call: lua/roombeacon.lua).

const (
	// BeaconMaxAge is the beacon's Cache-Control max-age, and how long a
	// replica reuses the beacon it read.
	BeaconMaxAge = time.Second
	// BeaconStale is its stale-while-revalidate: a CDN answers from a copy
	// up to this much past max-age while it fetches a new one, so a page
	// never waits on the origin for a beacon.
	BeaconStale = 2 * time.Second
	// BeaconLifetime is a beacon's exp − iat: the replica's reuse, the CDN's
	// max-age and stale-while-revalidate, and a second for clocks. A copy
	// past its exp is stale: the page asks its status instead.
	BeaconLifetime = BeaconMaxAge + BeaconMaxAge + BeaconStale + time.Second
	// BeaconPoll is how often the page polls the beacon.
	BeaconPoll = 2 * time.Second
	// HeaderBeacon is the header of a WAITING answer (enter, status) that
	// asks the page to poll the room beacon at the path it names instead
	// of its status (Options.Beacon).
	HeaderBeacon = "Flashgate-Beacon"
	// beaconContentType is the beacon's media type (RFC 7519 §10.3.1).
	beaconContentType = "application/jwt"
	// maxBeaconRooms bounds the replica's beacon map; past it the map is
	// reset (a cache).
	maxBeaconRooms = 10_000
)

// The Options.Beacon modes.
const (
	// BeaconAuto asks pages to poll the beacon while this replica holds
	// Options.MaxStreams event streams (the one more is refused: its page
	// polls). The default ("").
	BeaconAuto = "auto"
	// BeaconAlways asks every waiting page to poll the beacon.
	BeaconAlways = "always"
	// BeaconOff never asks (the beacon is still served).
	BeaconOff = "off"
)

func validBeaconMode(m string) error {
	switch m {
	case "", BeaconAuto, BeaconAlways, BeaconOff:
		return nil
	}
	return errors.New(`server: Options.Beacon must be "auto", "always" or "off"`)
}

// beaconCache is the replica's beacons, one per room.
type beaconCache struct {
	mode  string
	mu    sync.Mutex
	rooms map[string]*roomBeacon
}

// roomBeacon is one room's beacon: mu is held by the one request that
// reads it from Redis; the others wait for its result.
type roomBeacon struct {
	mu     sync.Mutex
	at     time.Time
	tok    []byte
	claims flashgate.BeaconClaims // tok's payload
	err    error                  // the read's error (an unknown room, Redis away), reused for as long as a beacon
}

func (b *beaconCache) room(room string) *roomBeacon {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.rooms == nil || len(b.rooms) >= maxBeaconRooms {
		b.rooms = map[string]*roomBeacon{}
	}
	rb := b.rooms[room]
	if rb == nil {
		rb = &roomBeacon{}
		b.rooms[strings.Clone(room)] = rb
	}
	return rb
}

// beaconCacheControl is the beacon's Cache-Control.
var beaconCacheControl = "public, max-age=" + strconv.Itoa(int(BeaconMaxAge/time.Second)) +
	", stale-while-revalidate=" + strconv.Itoa(int(BeaconStale/time.Second))

// GET /v1/rooms/:room/beacon: the room's beacon, a compact JWS
// (application/jwt, typ flashgate-beacon+jwt) whose payload is
// flashgate.BeaconClaims. It reads no user, visitor cookie or token and
// sets none: every buyer gets the same bytes. Errors (no-store): 404
// unknown_room, 400 invalid_input, 503 unavailable.
func (s *Server) roomBeacon(c *fiber.Ctx) error {
	tok, _, err := s.beacon(c.UserContext(), param(c, "room"))
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, beaconCacheControl)
	c.Set(fiber.HeaderContentType, beaconContentType)
	return c.Send(tok)
}

// beacon is room's beacon, the signed document and its payload, read from
// Redis at most once per BeaconMaxAge on this replica (tok is shared: not
// to be modified). Errors: RoomBeacon's.
func (s *Server) beacon(ctx context.Context, room string) (tok []byte, claims flashgate.BeaconClaims, err error) {
	rb := s.beacons.room(room)
	rb.mu.Lock()
	defer rb.mu.Unlock()
	now := s.now()
	if (rb.tok == nil && rb.err == nil) || now.Sub(rb.at) >= BeaconMaxAge || now.Before(rb.at) {
		// An error (an unknown room, Redis away) is kept as long as a beacon:
		// the requests of the second after it get it without a Redis call each.
		c, tok, err := s.is.RoomBeacon(ctx, room, BeaconLifetime, BeaconLifetime+BeaconPoll)
		rb.tok, rb.claims, rb.err, rb.at = []byte(tok), c, err, now
		if err != nil {
			rb.tok, rb.claims = nil, flashgate.BeaconClaims{}
		}
	}
	return rb.tok, rb.claims, rb.err
}

// beaconWanted reports whether waiting pages should poll the beacon now
// (Options.Beacon).
func (s *Server) beaconWanted() bool {
	switch s.beacons.mode {
	case BeaconOff:
		return false
	case BeaconAlways:
		return true
	}
	return s.streams.full()
}

// beaconHint sets HeaderBeacon on a WAITING answer of room when the page
// should poll the beacon (Options.Beacon).
func (s *Server) beaconHint(c *fiber.Ctx, room string) {
	if s.beaconWanted() {
		c.Set(HeaderBeacon, "/v1/rooms/"+url.PathEscape(room)+"/beacon")
	}
}

// full reports whether the replica holds its total of open streams
// (Options.MaxStreams; false without one).
func (l *streamLimits) full() bool {
	if l == nil || l.total <= 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open >= l.total
}
