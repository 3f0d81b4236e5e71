package flashgate

import "encoding/json"

// The join receipt profile (docs/rooms.md#pre-queue-lottery). A receipt is a
// compact JWS that the issuer hands every pre-queue entrant, signed with the
// admission keys (EdDSA, the same key ring and JWKS) but with its own typ,
// so that it can never stand for an admission token (the verifier refuses
// any typ but TokenType, RFC 8725 §3.11) nor for an invite. It proves that
// the room committed to its lottery seed (Commitment) before the entrant's
// arrival number was known, so that once the seed is public the entrant can
// compute their drawn place (issuer.VerifyReceipt, `flashgate lottery
// verify`, verifyReceipt in js/flashgate-verifier).
const (
	// ReceiptType is the receipt's typ header.
	ReceiptType = "fg-receipt+jwt"
)

// ReceiptHeader is a receipt's protected header: exactly
// {"alg":"EdDSA","kid":…,"typ":"fg-receipt+jwt"}.
func ReceiptHeader(kid string) Header { return Header{Alg: Alg, Kid: kid, Typ: ReceiptType} }

// ReceiptClaims is a receipt's payload. Field order is fixed.
type ReceiptClaims struct {
	Iss     string `json:"iss"`     // the issuer (admission tokens' iss)
	Room    string `json:"room"`    // the room id
	Epoch   string `json:"epoch"`   // the room's epoch: the lottery's and the arrival number's scope
	Sub     string `json:"sub"`     // the user id
	Arrival int64  `json:"arrival"` // the entry's arrival number in the room (1, 2, …)
	Iat     int64  `json:"iat"`     // s: when the receipt was signed
	// Commitment is the lottery commitment the room showed when the receipt
	// was signed: lowercase hex SHA-256 (issuer.LotteryCommitment).
	Commitment string `json:"commitment"`
	// Randomness names the draw's randomness the room promised when the
	// receipt was signed: "drand:<chain hash>" (a drand round after the
	// opening) or "operator-chosen seed" (no beacon). Absent in receipts
	// signed before it existed.
	Randomness string `json:"randomness,omitempty"`
}

// JSON is c's serialisation (the JWS payload).
func (c ReceiptClaims) JSON() []byte {
	b, _ := json.Marshal(c) // strings and integers only: cannot fail
	return b
}
