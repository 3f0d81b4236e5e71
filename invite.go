package flashgate

import "encoding/json"

// The invite token profile (docs/rooms.md#priority-lanes-and-invites). An invite
// is a compact JWS signed with the issuer's admission keys (EdDSA, the same
// key ring and JWKS) but with its own typ and aud, so that neither kind can
// stand for the other: the verifier refuses an invite as an admission token
// (typ, RFC 8725 §3.11), and the issuer refuses an admission token as an
// invite (typ and aud).
const (
	// InviteType is the invite's typ header.
	InviteType = "flashgate-invite+jwt"
	// InviteAudience is the invite's aud claim.
	InviteAudience = "flashgate-invite"
)

// Lanes an invite admits to (InviteClaims.Lane).
const (
	// LanePriority: the user waits in the room's priority lane, admitted
	// before the public line within the same capacity and rate.
	LanePriority = "priority"
	// LaneBypass: the user is admitted at once when capacity and rate allow,
	// else waits at the tail of the priority lane.
	LaneBypass = "bypass"
	// LanePublic is the public line's name in an entry's lane (never an invite's).
	LanePublic = "public"
)

// InviteHeader is an invite's protected header: exactly
// {"alg":"EdDSA","kid":…,"typ":"flashgate-invite+jwt"}.
func InviteHeader(kid string) Header { return Header{Alg: Alg, Kid: kid, Typ: InviteType} }

// InviteClaims is an invite's payload. Times are seconds since the epoch
// (NumericDate). Field order is fixed.
type InviteClaims struct {
	Iss     string `json:"iss"`
	Aud     string `json:"aud"`           // InviteAudience
	Sub     string `json:"sub,omitempty"` // the one user it admits; "" for anyone who holds it
	Product string `json:"product"`       // the room id (ProductClaim, as in admission tokens)
	Lane    string `json:"lane"`          // LanePriority or LaneBypass
	Jti     string `json:"jti"`           // the invite's id: what a single use is recorded under
	Once    bool   `json:"once,omitempty"`
	Iat     int64  `json:"iat"`
	Exp     int64  `json:"exp"`
}

// JSON is c's serialisation (the JWS payload).
func (c InviteClaims) JSON() []byte {
	b, _ := json.Marshal(c) // strings, integers and a bool: cannot fail
	return b
}
