package verifier

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// The room beacon (docs/browser.md#the-room-beacon): a small public
// document per room, GET /v1/rooms/{room}/beacon, the same for every buyer,
// that a CDN caches for a second. It is a compact JWS signed with the
// admission keys (EdDSA, the same JWKS) under its own typ, so it never
// passes for an admission token (Verify refuses every typ but TokenType, RFC
// 8725 §3.11) and no admission token passes for a beacon.
const (
	// BeaconType is the room beacon's typ header.
	BeaconType = "flashgate-beacon+jwt"
	// MaxBeaconSize is the largest raw beacon VerifyBeacon accepts, in bytes.
	MaxBeaconSize = 8192
	// MaxBeaconLifetime bounds a beacon's exp − iat.
	MaxBeaconLifetime = time.Minute
)

// Beacon is a room beacon's payload. Times are seconds (iat, exp) or ms
// (*_ms) since 1970; arrival numbers are the room's (Entry.Arrival, 1, 2, …).
type Beacon struct {
	Iss  string `json:"iss"`
	Room string `json:"room"`
	Iat  int64  `json:"iat"` // s: when the figures were read
	Exp  int64  `json:"exp"` // s: a copy older than this is stale (max-age + stale-while-revalidate + a second)
	// State is the room's state in effect: "open", "paused" or "closed".
	State       string `json:"state"`
	PageMessage string `json:"page_message,omitempty"`
	// CloseReason is why the room closed (state closed; the status answer's reason).
	CloseReason string `json:"close_reason,omitempty"`
	OpensAtMs   int64  `json:"opens_at_ms,omitempty"` // the room's opening time (a scheduled room), ms
	EndedAtMs   int64  `json:"ended_at_ms,omitempty"` // when the room ended (state closed), ms
	// TotalWaiting counts both lanes (the status answer's total_waiting);
	// Priority is the priority lane's length, ahead of every public entry.
	TotalWaiting int64 `json:"total_waiting"`
	Priority     int64 `json:"priority"`
	// Head is the first waiting arrival number of the public line after
	// the pre-queue (0: nobody waits there): every public arrival before it
	// was admitted, left or lapsed. Tail is the last waiting one.
	Head int64 `json:"head"`
	Tail int64 `json:"tail"`
	// ExactThrough: arrivals up to it are placed by the pre-queue lottery,
	// not by their number (the beacon cannot place them); Before is how
	// many entries (drawn or in the pre-queue) wait ahead of Head.
	ExactThrough int64 `json:"exact_through"`
	Before       int64 `json:"drawn_ahead"`
	// ClosedThrough: arrivals up to it belong to a line that closing ended.
	ClosedThrough int64 `json:"closed_through"`
	// NearHead: a page whose estimated place is at most this confirms it
	// with a status call (the exact place near the head).
	NearHead int64 `json:"near_head"`
	// Buckets are [through, waiting] pairs, through increasing from Head to
	// Tail: waiting public entries wait with an arrival number in
	// (ExactThrough, through]. Exact counts; a page places itself between
	// two of them (Place).
	Buckets [][2]int64 `json:"buckets"`
}

// Place estimates the place (1 = next) of the public entry with arrival
// number arrival from b, as of b's figures, and bounds its error:
// |place − exact| ≤ maxErr, where exact is the place the status script
// answers at the same instant, and maxErr is the number of arrivals in the
// entry's bucket that no longer wait in the public line (left, lapsed,
// admitted, or entered through a lane): 0 while none did. ok is false when
// b cannot place arrival — in the pre-queue (≤ ExactThrough), ahead of the
// head (admitted, left or in a lane: ask status), or after the tail (it
// arrived after b: place is then a guess, b.Priority+b.Before+waiting+the
// arrivals since, and maxErr −1).
func (b *Beacon) Place(arrival int64) (place, maxErr int64, ok bool) {
	if arrival <= b.ExactThrough || b.Head <= 0 || arrival < b.Head {
		return 0, -1, false
	}
	lo, below := b.Head-1, int64(0)
	for _, bk := range b.Buckets {
		through, c := bk[0], bk[1]
		if arrival <= through {
			span, w := through-lo, c-below
			x := ((arrival-lo)*w + span - 1) / span // ceil: the exact count when nobody in the bucket left
			x = max(1, x)
			return b.Priority + b.Before + below + x, span - w, true
		}
		lo, below = through, c
	}
	return b.Priority + b.Before + below + (arrival - lo), -1, false
}

// VerifyBeacon checks raw as a room beacon this Verifier's key set signed
// for its Config.Issuer, for room (any room when ""), not expired (exp ≥ now
// − Leeway) and not issued in the future (iat ≤ now + Leeway), with exp −
// iat ≤ MaxBeaconLifetime, and returns its payload. The header must be
// exactly alg EdDSA, kid and typ BeaconType: an admission token, invite or
// join receipt is refused (ErrBadType). Errors are the Verify sentinels:
// ErrTooLarge, ErrMalformed, ErrUnsupportedAlg, ErrForbiddenHeader,
// ErrBadType, ErrUnknownKey, ErrUnavailable, ErrBadSignature,
// ErrInvalidClaims, ErrBadIssuer, ErrBadProduct (another room),
// ErrExpired, ErrNotYetValid, ErrLifetimeTooLong.
func (v *Verifier) VerifyBeacon(ctx context.Context, raw, room string) (*Beacon, error) {
	if len(raw) > MaxBeaconSize {
		return nil, fmt.Errorf("%w: %d bytes", ErrTooLarge, len(raw))
	}
	d1 := strings.IndexByte(raw, '.')
	if d1 <= 0 {
		return nil, fmt.Errorf("%w: not a compact JWS", ErrMalformed)
	}
	d2 := d1 + 1 + strings.IndexByte(raw[d1+1:], '.')
	if d2 <= d1+1 || d2 == len(raw)-1 || strings.IndexByte(raw[d2+1:], '.') >= 0 {
		return nil, fmt.Errorf("%w: not three non-empty segments", ErrMalformed)
	}
	var buf [MaxBeaconSize]byte
	n, ok := decodeSegment(buf[:], raw[:d1])
	if !ok {
		return nil, fmt.Errorf("%w: header is not strict base64url", ErrMalformed)
	}
	hdr := buf[:n]
	var hmem [maxMembers]member
	members, err := parseTopObject(hdr, hmem[:0])
	if err != nil {
		return nil, jsonError("header", err)
	}
	var alg, typ, kid *member
	var scratch [32]byte
	for k := range members {
		m := &members[k]
		switch name := nameOf(hdr, m, &scratch); string(name) {
		case "alg":
			alg = m
		case "typ":
			typ = m
		case "kid":
			kid = m
		default:
			return nil, fmt.Errorf("%w: %q", ErrForbiddenHeader, name)
		}
	}
	if !stringIs(hdr, alg, Alg) {
		return nil, fmt.Errorf("%w: alg %s", ErrUnsupportedAlg, describe(hdr, alg))
	}
	if !stringIs(hdr, typ, BeaconType) {
		return nil, fmt.Errorf("%w: typ %s, want %q", ErrBadType, describe(hdr, typ), BeaconType)
	}
	if kid == nil || kid.kind != kindString || stringLen(hdr, kid) == 0 || stringLen(hdr, kid) > maxKIDLen {
		return nil, fmt.Errorf("%w: kid %s", ErrUnknownKey, describe(hdr, kid))
	}
	pub, err := v.keys.PublicKey(ctx, stringValue(hdr, kid))
	if err != nil {
		if !isVerifierError(err) {
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		return nil, err
	}
	if err := verifySignature(pub, []byte(raw[:d2]), raw[d2+1:]); err != nil {
		return nil, err
	}
	n, ok = decodeSegment(buf[:], raw[d1+1:d2])
	if !ok {
		return nil, fmt.Errorf("%w: payload is not strict base64url", ErrMalformed)
	}
	var b Beacon
	if err := json.Unmarshal(buf[:n], &b); err != nil {
		return nil, fmt.Errorf("%w: payload: %v", ErrInvalidClaims, err)
	}
	now := v.now().Unix()
	switch {
	case b.Iat <= 0 || b.Exp <= b.Iat:
		return nil, fmt.Errorf("%w: iat %d, exp %d", ErrInvalidClaims, b.Iat, b.Exp)
	case b.Iss != v.issuer:
		return nil, fmt.Errorf("%w: iss %q", ErrBadIssuer, b.Iss)
	case room != "" && b.Room != room:
		return nil, fmt.Errorf("%w: beacon of room %q", ErrBadProduct, b.Room)
	case b.Exp-b.Iat > int64(MaxBeaconLifetime/time.Second):
		return nil, fmt.Errorf("%w: %d s", ErrLifetimeTooLong, b.Exp-b.Iat)
	case now > b.Exp+v.leeway:
		return nil, fmt.Errorf("%w: exp %d", ErrExpired, b.Exp)
	case b.Iat > now+v.leeway:
		return nil, fmt.Errorf("%w: iat %d", ErrNotYetValid, b.Iat)
	}
	return &b, nil
}
