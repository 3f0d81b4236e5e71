package flashgate

import "encoding/json"

// The room beacon profile (docs/browser.md#the-room-beacon): a public,
// cacheable JWS per room signed with the admission keys under its own typ,
// so that it can never stand for an admission token, an invite or a join
// receipt. Its payload is verifier.Beacon; the verifier core keeps its own
// copy of the typ (verifier.BeaconType), held equal by a test.
const (
	// BeaconType is the room beacon's typ header.
	BeaconType = "flashgate-beacon+jwt"
)

// BeaconHeader is a room beacon's protected header: exactly
// {"alg":"EdDSA","kid":…,"typ":"flashgate-beacon+jwt"}.
func BeaconHeader(kid string) Header { return Header{Alg: Alg, Kid: kid, Typ: BeaconType} }

// BeaconClaims is a room beacon's payload (verifier.Beacon reads it; the
// same fields, held equal by a test). Field order is fixed. Times are
// seconds (iat, exp) or ms (*_ms) since 1970; arrival numbers are the
// room's (the status answer's arrival, 1, 2, …).
type BeaconClaims struct {
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

// JSON is c's serialisation (the payload that is signed).
func (c BeaconClaims) JSON() []byte {
	b, _ := json.Marshal(c) // strings, numbers and arrays of them: cannot fail
	return b
}
