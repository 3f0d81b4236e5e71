package issuer

// The room beacon (GET /v1/rooms/{room}/beacon, docs/browser.md#the-room-beacon):
// one small public document per room, the same for every buyer, that a
// page places itself from with its own arrival number.

import (
	"context"
	"time"

	"github.com/flashgate/flashgate"
)

// BeaconBuckets is the most bucket boundaries a room beacon carries (one
// ZCOUNT each in lua/roombeacon.lua): geometric from the head to the tail,
// so a bucket is one arrival wide near the head and about span^(1/32) −
// 1 of the distance to the head further back (a 1,000,000-arrival line:
// ~54 %; 10,000: ~33 %).
const BeaconBuckets = 32

// BeaconSigner signs room beacons (keys.Ring and keys.FileRing do): the
// payload (flashgate.BeaconClaims.JSON) as a compact JWS with the header
// flashgate.BeaconHeader(kid).
type BeaconSigner interface {
	SignBeacon(payload []byte) (string, error)
}

// ErrNoBeaconSigner: Config.Signer does not sign room beacons (errors.Is
// flashgate.ErrUnavailable too: the beacon is answered 503).
var ErrNoBeaconSigner = &flashgate.Error{Code: flashgate.CodeUnavailable, Message: "the issuer's signer does not sign room beacons"}

// RoomBeacon reads room's beacon (lua/roombeacon.lua: one Redis call, a
// ZCOUNT per bucket boundary) and returns its payload, issued now and
// expiring after ttl (whole seconds, at least one), and the same payload
// signed (flashgate.BeaconHeader). near is how old a page's copy may be
// when it acts on it (the cache's max-age plus stale-while-revalidate plus
// the page's poll interval): NearHead covers everyone the room could admit
// meanwhile (as the status snapshot's exact zone does). Errors:
// flashgate.ErrInvalidInput, flashgate.ErrUnknownRoom,
// flashgate.ErrUnavailable, ErrNoBeaconSigner.
func (is *Queue) RoomBeacon(ctx context.Context, room string, ttl, near time.Duration) (flashgate.BeaconClaims, string, error) {
	if err := checkRoom(room); err != nil {
		return flashgate.BeaconClaims{}, "", err
	}
	s, ok := is.cfg.Signer.(BeaconSigner)
	if !ok {
		return flashgate.BeaconClaims{}, "", ErrNoBeaconSigner
	}
	now := time.Now()
	if is.cfg.Now != nil {
		now = is.cfg.Now()
	}
	r, err := is.db.RoomBeacon(ctx, room, BeaconBuckets)
	if err != nil {
		return flashgate.BeaconClaims{}, "", err
	}
	secs := max(1, int64((ttl+time.Second-1)/time.Second))
	c := flashgate.BeaconClaims{Iss: is.cfg.Issuer, Room: room, Iat: now.Unix(), Exp: now.Unix() + secs,
		State: r.State, PageMessage: r.PageMessage, TotalWaiting: r.Waiting + r.Priority, Priority: r.Priority,
		Head: r.Head, Tail: r.Tail, ExactThrough: r.ExactThrough, Before: r.Before, ClosedThrough: r.ClosedSeq,
		Buckets: make([][2]int64, 0, len(r.Buckets))}
	if r.State == string(RoomClosed) || r.ClosedSeq > 0 {
		c.CloseReason = r.CloseReason
	}
	if r.State == string(RoomClosed) {
		c.EndedAtMs = r.EndedMs
	}
	if r.OpensMs > 0 && r.State != string(RoomClosed) {
		c.OpensAtMs = r.OpensMs
	}
	sn := snapshot{rate: r.Rate, tick: time.Duration(r.TickMs) * time.Millisecond}
	c.NearHead = sn.nearHead(near)
	for _, b := range r.Buckets {
		c.Buckets = append(c.Buckets, [2]int64{b.Through, b.Waiting})
	}
	tok, err := s.SignBeacon(c.JSON())
	if err != nil {
		return flashgate.BeaconClaims{}, "", flashgate.Errorf(flashgate.CodeUnavailable, "sign the room beacon: %v", err)
	}
	return c, tok, nil
}
