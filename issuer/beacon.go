package issuer

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cloudflare/circl/ecc/bls12381"
)

// The public randomness of the pre-queue lottery (docs/rooms.md#pre-queue-lottery):
// a drand round (League of Entropy) of an unchained chain that signs on G1
// (scheme bls-unchained-g1-rfc9380, as quicknet does), published after the
// room's cutoff. Nobody — the operator included — knows its value before
// the round's time, and anyone checks it against the chain's public key.

// BeaconChain is the public information of a drand chain (its /info).
type BeaconChain struct {
	// Hash is the chain hash (hex), as in the chain's URLs.
	Hash string `json:"hash"`
	// PublicKey is the group public key (hex, a compressed G2 point, 96 bytes).
	PublicKey string `json:"public_key"`
	// GenesisTime is round 1's time (s since 1970); Period the time between rounds (s).
	GenesisTime int64 `json:"genesis_time"`
	Period      int64 `json:"period"`
}

// Quicknet is the League of Entropy's quicknet chain (rounds every 3 s since
// 2023-08-23; scheme bls-unchained-g1-rfc9380).
var Quicknet = BeaconChain{
	Hash:        "52db9ba70e0cc0f6eaf7803dd07447a1f5477735fd3f661792ba94600c84e971",
	PublicKey:   "83cf0f2896adee7eb8b5f01fcad3912212c437e0073e911fb90022d3e760183c8c4b450b6a0a6c3ac6a5776a2d1064510d1fec758c921cc22b0e17e63aaf4bcb5ed66304de9cf809bd274ca73bab4af5a6e9c76a4bc09e76eae8991ef5ece45a",
	GenesisTime: 1692803367,
	Period:      3,
}

// beaconDST is the hash-to-curve domain of the G1-signing drand schemes (RFC 9380).
var beaconDST = []byte("BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_")

// BeaconDelay is how long after the room's opening (its opens_at, or the
// cutoff's time for a room opened by hand) the lottery's beacon round comes:
// the round is the first one at or after opens_at + BeaconDelay, so the
// cutoff and the entrant digest (recorded within a tick of the opening) are
// fixed before anyone can know the round's value.
const BeaconDelay = 10 * time.Second

// RoundTime returns when round r (≥ 1) is published: genesis + (r−1)·period.
func (c BeaconChain) RoundTime(r uint64) time.Time {
	return time.Unix(c.GenesisTime+int64(r-1)*c.Period, 0)
}

// RoundAt returns the first round published at or after t (1 before genesis).
func (c BeaconChain) RoundAt(t time.Time) uint64 {
	if c.Period <= 0 {
		return 0
	}
	d := t.Unix() - c.GenesisTime
	if t.Nanosecond() > 0 {
		d++ // at or after t: a fractional second rounds up
	}
	if d <= 0 {
		return 1
	}
	return uint64((d+c.Period-1)/c.Period) + 1
}

// LotteryRound returns the beacon round of a lottery whose room opens at
// opens (the first round at or after opens + BeaconDelay).
func (c BeaconChain) LotteryRound(opens time.Time) uint64 { return c.RoundAt(opens.Add(BeaconDelay)) }

// BeaconRound is one round of a drand chain.
type BeaconRound struct {
	Round     uint64 `json:"round"`
	Signature string `json:"signature"` // hex, a compressed G1 point (48 bytes)
	// Randomness is SHA-256(signature), hex: what the lottery uses.
	Randomness string `json:"randomness"`
}

// ErrBeaconInvalid: a beacon round whose signature does not verify against
// the chain's public key (or that does not parse).
var ErrBeaconInvalid = errors.New("beacon round invalid")

// VerifyBeacon checks b against chain c: the BLS signature over
// SHA-256(round as 8 bytes big-endian) on G1 under c's public key, and that
// b.Randomness (when set) is SHA-256 of the signature. It returns the
// randomness (hex). Errors: ErrBeaconInvalid.
func VerifyBeacon(c BeaconChain, b BeaconRound) (string, error) {
	pkb, err := hex.DecodeString(c.PublicKey)
	if err != nil {
		return "", fmt.Errorf("%w: chain public key not hex", ErrBeaconInvalid)
	}
	var pk bls12381.G2
	if err := pk.SetBytes(pkb); err != nil || pk.IsIdentity() {
		return "", fmt.Errorf("%w: chain public key is not a G2 point", ErrBeaconInvalid)
	}
	sigb, err := hex.DecodeString(b.Signature)
	if err != nil || len(sigb) != bls12381.G1SizeCompressed {
		return "", fmt.Errorf("%w: round %d: signature is not 48 hex bytes", ErrBeaconInvalid, b.Round)
	}
	var sig bls12381.G1
	if err := sig.SetBytes(sigb); err != nil || sig.IsIdentity() {
		return "", fmt.Errorf("%w: round %d: signature is not a G1 point", ErrBeaconInvalid, b.Round)
	}
	var rb [8]byte
	binary.BigEndian.PutUint64(rb[:], b.Round)
	msg := sha256.Sum256(rb[:])
	var h bls12381.G1
	h.Hash(msg[:], beaconDST)
	// e(sig, g2) == e(H(m), pk)  ⇔  e(sig, g2) · e(H(m), pk)^−1 == 1
	if !bls12381.ProdPairFrac([]*bls12381.G1{&sig, &h}, []*bls12381.G2{bls12381.G2Generator(), &pk}, []int{1, -1}).IsIdentity() {
		return "", fmt.Errorf("%w: round %d: signature does not verify under chain %s", ErrBeaconInvalid, b.Round, clip(c.Hash))
	}
	sum := sha256.Sum256(sigb)
	r := hex.EncodeToString(sum[:])
	if b.Randomness != "" && !strings.EqualFold(b.Randomness, r) {
		return "", fmt.Errorf("%w: round %d: randomness is not SHA-256 of the signature", ErrBeaconInvalid, b.Round)
	}
	return r, nil
}

// ErrBeaconNotYet: the round is not published yet (its time is to come, or
// the relay does not have it).
var ErrBeaconNotYet = errors.New("beacon round not published yet")

// Beacon fetches and verifies rounds of one chain from an HTTP relay that
// serves drand's API (GET {URL}/{chain hash}/public/{round}).
type Beacon struct {
	URL    string
	Chain  BeaconChain
	Client *http.Client // nil: a client with a 2 s timeout
}

// Round fetches round r and verifies it (VerifyBeacon). Errors:
// ErrBeaconNotYet (before the round's time, or a 404 / 425 from the relay),
// ErrBeaconInvalid, or the transport's.
func (b *Beacon) Round(ctx context.Context, r uint64, now time.Time) (BeaconRound, string, error) {
	if now.Before(b.Chain.RoundTime(r)) {
		return BeaconRound{}, "", fmt.Errorf("%w: round %d is due at %s", ErrBeaconNotYet, r, b.Chain.RoundTime(r).UTC().Format(time.RFC3339))
	}
	hc := b.Client
	if hc == nil {
		hc = &http.Client{Timeout: 2 * time.Second}
	}
	u := strings.TrimRight(b.URL, "/") + "/" + b.Chain.Hash + "/public/" + strconv.FormatUint(r, 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return BeaconRound{}, "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return BeaconRound{}, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return BeaconRound{}, "", err
	}
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusTooEarly:
		return BeaconRound{}, "", fmt.Errorf("%w: relay answered %d for round %d", ErrBeaconNotYet, resp.StatusCode, r)
	case resp.StatusCode != http.StatusOK:
		return BeaconRound{}, "", fmt.Errorf("beacon relay answered %d for round %d", resp.StatusCode, r)
	}
	var br BeaconRound
	if err := json.Unmarshal(body, &br); err != nil {
		return BeaconRound{}, "", fmt.Errorf("%w: round %d: %v", ErrBeaconInvalid, r, err)
	}
	if br.Round != r {
		return BeaconRound{}, "", fmt.Errorf("%w: asked for round %d, got %d", ErrBeaconInvalid, r, br.Round)
	}
	rnd, err := VerifyBeacon(b.Chain, br)
	return br, rnd, err
}
