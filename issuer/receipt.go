package issuer

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/sha1" //nolint:gosec // the deprecated commitment: SHA-1 of the seed, as lua/stats.lua shows it
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flashgate/flashgate"
)

// Join receipts and the public lottery (docs/rooms.md#pre-queue-lottery): the
// commitment to a shuffle room's seed is public from the moment the seed
// exists (RoomLottery, the room view), every pre-queue entrant gets a
// receipt carrying it (Entry.Receipt), and once the seed is public after the
// draw anyone checks a receipt and computes its drawn place from public data
// alone (VerifyReceipt).

// commitmentDomain separates the lottery commitment from every other use of
// SHA-256 (LotteryCommitment).
const commitmentDomain = "flashgate lottery commitment v1\x00"

// LotteryCommitment returns the public commitment to a room's lottery seed:
// the lowercase hex SHA-256 of "flashgate lottery commitment v1" NUL room
// NUL epoch NUL seed. Room and epoch bind it to one room's line: a seed
// committed for one room or epoch proves nothing for another.
func LotteryCommitment(room, epoch, seed string) string {
	sum := sha256.Sum256([]byte(commitmentDomain + room + "\x00" + epoch + "\x00" + seed))
	return hex.EncodeToString(sum[:])
}

// LotteryPlace returns the place (1-based) the lottery with seed gives
// arrival number seq among arrival numbers 1 … cutoff of a room with epoch:
// one plus the count of those whose LotteryScore is lower: the order of the
// whole pre-queue. Entries that left or were banned, and priority-lane
// entries, hold arrival numbers too but do not wait in the public line, so
// an entry's Position (who still waits, and the priority lane ahead) can
// differ from it. O(cutoff) SHA-1s (0.24 s for a
// million). seq must be in 1 … cutoff.
func LotteryPlace(seed, epoch string, cutoff, seq int64) int64 {
	bits := LotteryBits(cutoff)
	mine := LotteryScore(seed, epoch, bits, seq)
	place := int64(1)
	for s := int64(1); s <= cutoff; s++ {
		if s != seq && LotteryScore(seed, epoch, bits, s) < mine {
			place++
		}
	}
	return place
}

// RoomLottery is a room's public lottery view (GET /v1/rooms/{room}): what
// anyone may know of it at any time.
type RoomLottery struct {
	Room     string
	Epoch    string // "" until the room's first script call gives it one
	PreQueue PreQueue
	// Commitment is LotteryCommitment(Room, Epoch, secret), "" without a
	// lottery: the secret is LotterySecret (derived from the issuer's key)
	// or, for a lottery configured before it, the stored seed.
	Commitment string
	// CommitmentSHA1 is the SHA-1 (hex) of the committed secret: deprecated,
	// shown for one release for clients of the admin stats' lottery.commitment.
	CommitmentSHA1 string
	// Source is where the draw's randomness comes from: OperatorChosen (no
	// beacon: whoever holds the issuer's key knows the order once the
	// entrants are fixed), or "drand" (Beacon's round: nobody knows it
	// before the round's time).
	Source string
	// Beacon is the chain (public info) and BeaconRound the round the draw
	// uses (0: none): the first round at or after opens_at + BeaconDelay,
	// shown from the configuration on, fixed when the entrants are.
	Beacon      *BeaconChain
	BeaconRound uint64
	// BeaconSignature is the round's signature (hex), once the seed is revealed.
	BeaconSignature string
	// Drawn: the cutoff is recorded and the order fixed; Cutoff and Bits
	// are set from then on (0, 0 before).
	Drawn  bool
	Cutoff int64
	Bits   int
	// Entrants is the EntrantDigest of the pre-queue at the cutoff,
	// EntrantCount its entries, FixedAt when the issuer recorded it ("", 0,
	// zero until then).
	Entrants     string
	EntrantCount int64
	FixedAt      time.Time
	// Secret is the committed secret and Seed the seed the draw uses
	// (LotterySeed), both "" until the issuer reveals them after the cutoff
	// (and the beacon round); for a lottery configured before derived
	// secrets, Seed is the stored seed and Secret equals it.
	Secret, Seed string
	// DrawnAt is when the cutoff was recorded; PlacedAt when the last
	// pre-queue entry was placed (zero until then).
	DrawnAt, PlacedAt time.Time
	// Commitments lists every commitment the room showed, oldest first,
	// with when and why it was recorded ("configured", "restored", or
	// "unrecorded" for the current one when it is in no record: a secret
	// or seed written outside the issuer). More than one for an epoch is a
	// re-roll, and Influence says so.
	Commitments []CommitmentRecord
}

// CommitmentRecord is one commitment a room showed (RoomLottery.Commitments).
type CommitmentRecord struct {
	Commitment string    `json:"commitment"`
	Epoch      string    `json:"epoch"`
	At         time.Time `json:"-"`
	AtMs       int64     `json:"at_ms"`
	Why        string    `json:"why"`
}

// RoomLottery returns room's public lottery view, read with one HGETALL of
// its config hash (no script: the draw itself happens in the first script
// that finds the room open, within a tick of the opening). The secret and
// seed are in the view only once the issuer revealed them. An ended or
// deleted room keeps its view until its keys expire (RoomConfig.Retention).
// Errors: flashgate.ErrInvalidInput, flashgate.ErrUnknownRoom, flashgate.ErrUnavailable.
func (is *core) RoomLottery(ctx context.Context, room string) (*RoomLottery, error) {
	if err := checkRoom(room); err != nil {
		return nil, err
	}
	m, err := is.cfg.Redis.HGetAll(ctx, roomKeys(room)[0]).Result()
	if err != nil {
		return nil, unavailable(err)
	}
	if len(m) == 0 { // a deleted or ended room keeps its view until its keys expire (retention): audits come after sales
		return nil, flashgate.Errorf(flashgate.CodeUnknownRoom, "unknown room %q", room)
	}
	v := &RoomLottery{Room: room, Epoch: m["epoch"], PreQueue: preQueueOf(m["prequeue"])}
	ms := func(k string) time.Time {
		n, _ := strconv.ParseInt(m[k], 10, 64)
		if n <= 0 {
			return time.Time{}
		}
		return time.UnixMilli(n)
	}
	_, drawn := m["lottery_cutoff"]
	seed := m["lottery_seed"]
	var committed string
	switch {
	case seed == "":
	case seed == LotteryPending || m["lottery_secret"] != "": // derived (lottery_reveal.go)
		committed = m["lottery_secret"]
		if committed == "" && v.Epoch != "" {
			committed = LotterySecret(is.lotteryKey, room, v.Epoch)
		}
		v.Source = OperatorChosen
		if r, _ := strconv.ParseUint(m["lottery_round"], 10, 64); r > 0 || (m["lottery_entrants"] == "" && is.cfg.Beacon != nil) {
			v.Source, v.BeaconRound = "drand", r
			if b := is.cfg.Beacon; b != nil {
				c := b.Chain
				v.Beacon = &c
				if r == 0 {
					v.BeaconRound = c.LotteryRound(lotteryOpens(m))
				}
			}
		}
		v.BeaconSignature = m["lottery_beacon"]
		v.Entrants, v.FixedAt = m["lottery_entrants"], ms("lottery_fixed_ms")
		v.EntrantCount, _ = strconv.ParseInt(m["lottery_entrants_n"], 10, 64)
		if seed != LotteryPending {
			v.Secret, v.Seed = committed, seed
		}
	default: // a seed stored before derived secrets: committed to as it is
		committed = seed
		v.Source = OperatorChosen
		if drawn {
			v.Secret, v.Seed = seed, seed
		}
	}
	if committed != "" {
		sum := sha1.Sum([]byte(committed)) //nolint:gosec // see import
		v.CommitmentSHA1 = hex.EncodeToString(sum[:])
		if v.Epoch != "" {
			v.Commitment = LotteryCommitment(room, v.Epoch, committed)
		}
	}
	if c, ok := m["lottery_cutoff"]; ok {
		v.Drawn, v.DrawnAt, v.PlacedAt = true, ms("lottery_ms"), ms("lottery_done_ms")
		v.Cutoff, _ = strconv.ParseInt(c, 10, 64)
		v.Bits = LotteryBits(v.Cutoff)
	}
	v.Commitments = commitmentRecords(m["lottery_commits"])
	if v.Commitment != "" && !slices.ContainsFunc(v.Commitments, func(r CommitmentRecord) bool {
		return r.Commitment == v.Commitment && r.Epoch == v.Epoch
	}) && len(v.Commitments) > 0 {
		v.Commitments = append(v.Commitments, CommitmentRecord{Commitment: v.Commitment, Epoch: v.Epoch, Why: "unrecorded"})
	}
	return v, nil
}

// Influence says which places of v's draw whoever runs the issuer could
// have steered, in words ("" when none could): all of them without a
// beacon (an operator-chosen seed: the key holder knows the order once the
// entrants are fixed, and can choose whom to let in before the cutoff), or
// when the entrants were fixed after the beacon round was published.
func (v RoomLottery) Influence() string {
	n := 0
	for _, r := range v.Commitments {
		if r.Epoch == v.Epoch {
			n++
		}
	}
	switch {
	case n > 1:
		return "every place: the room showed " + strconv.Itoa(n) + " different commitments in this epoch (a re-roll; see commitments)"
	case v.Source != "drand":
		return "every place: the seed is operator-chosen (no public beacon); whoever holds the issuer's key knew the order before the opening"
	case v.Beacon != nil && !v.FixedAt.IsZero() && !v.FixedAt.Before(v.Beacon.RoundTime(v.BeaconRound)):
		return "every place: the entrant list was fixed after beacon round " + strconv.FormatUint(v.BeaconRound, 10) + " was published"
	}
	return ""
}

// ActionLotteryCommit is the action of the audit event that journals a
// room's lottery commitment (journalCommitment).
const ActionLotteryCommit = "lottery_commit"

// journalCommitment journals room's lottery commitment, while its seed is
// secret, as an audit event (actor "issuer", action ActionLotteryCommit,
// detail {"commitment", "commitment_sha1"}; the event carries the epoch):
// the seed's existence and commitment outlive Redis with the journal. Called
// when a seed may have been written (SetRoom of a shuffle room, a room
// created by an enter: a default shuffle room, or one recovered after a
// data loss with a fresh seed); a repeat journals the same commitment again.
// A failure is logged: the configuration or entry stands.
func (is *core) journalCommitment(ctx context.Context, room string) {
	is.journalCommitmentWhy(ctx, room, "configured")
}

// journalCommitmentWhy is journalCommitment with why in the detail
// ("configured", or "restored" by Restore), the randomness the draw will
// use (RandomnessName) and its beacon round (0: none yet); it also records
// the commitment on the room view (recordCommitment).
func (is *core) journalCommitmentWhy(ctx context.Context, room, why string) {
	v, err := is.RoomLottery(ctx, room)
	if err != nil || v.Commitment == "" || v.Drawn {
		return
	}
	is.recordCommitment(ctx, room, v, why)
	detail, _ := json.Marshal(map[string]string{"commitment": v.Commitment, "commitment_sha1": v.CommitmentSHA1,
		"why": why, "randomness": v.RandomnessName(), "beacon_round": strconv.FormatUint(v.BeaconRound, 10)})
	if _, err := is.journalAudit(ctx, room, Audit{Actor: "issuer", Action: ActionLotteryCommit, Detail: detail}); err != nil {
		is.log.Warn("journal the lottery commitment", "room", room, "err", err)
	}
}

// ReceiptSigner signs join receipts (keys.Ring and keys.FileRing do): the
// claims (flashgate.ReceiptClaims.JSON) as a compact JWS with the header
// flashgate.ReceiptHeader(kid). An issuer whose Config.Signer is one gives
// every pre-queue entry a receipt (Entry.Receipt).
type ReceiptSigner interface {
	SignReceipt(payload []byte) (string, error)
}

// commitmentTTL bounds how long a replica reuses a room's commitment
// without reading the seed again: a restore that redrew a seed not yet
// drawn (restore.go) is seen within it.
const commitmentTTL = time.Second

type cachedCommitment struct {
	epoch, commitment, randomness string
	at                            time.Time
}

// commitment returns room's lottery commitment for epoch and the name of
// its randomness (RoomLottery.RandomnessName); "" if the room has no
// lottery, or is in another epoch now), from the cache when fresh.
func (is *core) commitment(ctx context.Context, room, epoch string, now time.Time) (string, string) {
	if c, ok := is.commitments.Load(room); ok {
		if c := c.(*cachedCommitment); c.epoch == epoch && now.Sub(c.at) < commitmentTTL && now.Sub(c.at) >= 0 {
			return c.commitment, c.randomness
		}
	}
	v, err := is.RoomLottery(ctx, room)
	if err != nil || v.Epoch != epoch {
		return "", ""
	}
	is.commitments.Store(strings.Clone(room), &cachedCommitment{epoch: v.Epoch, commitment: v.Commitment,
		randomness: v.RandomnessName(), at: now})
	return v.Commitment, v.RandomnessName()
}

// RandomnessName names where v's randomness comes from, as receipts carry
// it (ReceiptClaims.Randomness): "drand:<chain hash>" or OperatorChosen.
func (v RoomLottery) RandomnessName() string {
	if v.Source == "drand" && v.Beacon != nil {
		return "drand:" + v.Beacon.Hash
	}
	return OperatorChosen
}

// withReceipt sets e's LotteryCommitment and, with a Signer that signs
// receipts, its Receipt, when e waits in a pre-queue of epoch. A failure to
// read the commitment or to sign leaves them empty: the entry stands.
func (is *Queue) withReceipt(ctx context.Context, e *Entry, epoch string) {
	if !e.PreQueue || e.State != flashgate.StateWaiting || epoch == "" || e.Arrival <= 0 {
		return
	}
	now := time.Now()
	if is.cfg.Now != nil {
		now = is.cfg.Now()
	}
	e.LotteryCommitment, e.LotteryRandomness = is.commitment(ctx, e.Room, epoch, now)
	s, ok := is.cfg.Signer.(ReceiptSigner)
	if !ok || e.LotteryCommitment == "" {
		return
	}
	c := flashgate.ReceiptClaims{Iss: is.cfg.Issuer, Room: e.Room, Epoch: epoch, Sub: e.User, Arrival: e.Arrival,
		Iat: now.Unix(), Commitment: e.LotteryCommitment, Randomness: e.LotteryRandomness}
	if tok, err := s.SignReceipt(c.JSON()); err == nil {
		e.Receipt = tok
	}
}

// Errors of VerifyReceipt. Compare with errors.Is; details are wrapped.
var (
	// ErrReceiptInvalid: not a join receipt this key set signed — malformed,
	// another typ (an admission token or invite), a key the JWKS does not
	// publish, a bad signature, or claims that do not parse.
	ErrReceiptInvalid = errors.New("receipt invalid")
	// ErrReceiptOtherRoom: the receipt is for another room or epoch than the room view's.
	ErrReceiptOtherRoom = errors.New("receipt is for another room or epoch")
	// ErrLotteryNotDrawn: the room view shows no drawn lottery (no seed yet).
	ErrLotteryNotDrawn = errors.New("lottery not drawn yet")
	// ErrSeedMismatch: the public seed does not hash to the receipt's
	// commitment — the seed was changed after the receipt was signed.
	ErrSeedMismatch = errors.New("seed does not match the receipt's commitment")
	// ErrNotInPreQueue: the receipt's arrival is after the cutoff: not drawn.
	ErrNotInPreQueue = errors.New("arrival not in the drawn pre-queue")
)

// ReceiptKeys resolves the public keys receipts verify with
// (verifier.StaticKeys from a JWKS, keys.Ring).
type ReceiptKeys interface {
	PublicKey(ctx context.Context, kid string) (ed25519.PublicKey, error)
}

// ReceiptCheck is what VerifyReceipt proved.
type ReceiptCheck struct {
	Claims flashgate.ReceiptClaims
	Kid    string
	// Place is the drawn place (1-based) of Claims.Arrival among the
	// pre-queue's arrival numbers 1 … Cutoff (LotteryPlace).
	Place, Cutoff int64
	// Randomness is the beacon round's randomness (hex; "" without a beacon).
	Randomness string
	// Influence is RoomLottery.Influence: which places the operator could
	// have steered ("" none).
	Influence string
}

// MaxReceiptLen bounds a receipt; longer input is refused unread.
const MaxReceiptLen = 4096

// VerifyReceipt checks receipt against keys and the public room view v,
// from public data alone: its signature (typ fg-receipt+jwt, a key of
// keys), that it is for v's room and epoch, that v's seed hashes to the
// commitment it carries (LotteryCommitment), and that its arrival is in
// the drawn pre-queue; it returns the drawn place. Errors, in that order:
// ErrReceiptInvalid, ErrReceiptOtherRoom, ErrLotteryNotDrawn,
// ErrSeedMismatch, ErrNotInPreQueue.
func VerifyReceipt(ctx context.Context, receipt string, keys ReceiptKeys, v RoomLottery) (ReceiptCheck, error) {
	out, err := CheckReceipt(ctx, receipt, keys, v)
	if err != nil {
		return out, err
	}
	out.Place = LotteryPlace(v.Seed, v.Epoch, v.Cutoff, out.Claims.Arrival)
	return out, nil
}

// CheckReceipt is VerifyReceipt without the place (Place 0): every check,
// at no cost beyond the signature and one SHA-256, for an auditor that
// computes all places at once (LotteryOrder). Errors as VerifyReceipt.
func CheckReceipt(ctx context.Context, receipt string, keys ReceiptKeys, v RoomLottery) (ReceiptCheck, error) {
	var out ReceiptCheck
	h, payload, why := openJWS(ctx, receipt, MaxReceiptLen, flashgate.ReceiptType, keys)
	if why != "" {
		return out, fmt.Errorf("%w: %s", ErrReceiptInvalid, why)
	}
	out.Kid = h.Kid
	if strictJSON(payload, &out.Claims) != nil {
		return out, fmt.Errorf("%w: malformed claims", ErrReceiptInvalid)
	}
	c := out.Claims
	if c.Room == "" || c.Epoch == "" || c.Arrival <= 0 || len(c.Commitment) != sha256.Size*2 {
		return out, fmt.Errorf("%w: claims incomplete", ErrReceiptInvalid)
	}
	if c.Room != v.Room || c.Epoch != v.Epoch {
		return out, fmt.Errorf("%w: receipt for room %q epoch %q, room view of %q epoch %q",
			ErrReceiptOtherRoom, clip(c.Room), clip(c.Epoch), clip(v.Room), clip(v.Epoch))
	}
	if !v.Drawn || v.Seed == "" {
		return out, fmt.Errorf("%w: room %q shows no seed", ErrLotteryNotDrawn, v.Room)
	}
	secret := cmp.Or(v.Secret, v.Seed)
	if got := LotteryCommitment(c.Room, c.Epoch, secret); got != c.Commitment {
		return out, fmt.Errorf("%w: SHA-256 of secret %q is %s, the receipt committed to %s",
			ErrSeedMismatch, clip(secret), got, c.Commitment)
	}
	if c.Randomness != "" && c.Randomness != v.RandomnessName() {
		return out, fmt.Errorf("%w: the receipt promised randomness %q, the room shows %q",
			ErrSeedMismatch, clip(c.Randomness), v.RandomnessName())
	}
	if v.Source == "drand" {
		chain := v.Beacon
		if chain == nil {
			return out, fmt.Errorf("%w: room %q names no beacon chain", ErrBeaconInvalid, v.Room)
		}
		if chain.Hash == Quicknet.Hash {
			chain = &Quicknet // the League of Entropy's key as published, not as the room view says
		}
		rnd, err := VerifyBeacon(*chain, BeaconRound{Round: v.BeaconRound, Signature: v.BeaconSignature})
		if err != nil {
			return out, err
		}
		out.Randomness = rnd
	}
	if v.Entrants != "" || v.Source == "drand" {
		if want := LotterySeed(c.Room, c.Epoch, secret, out.Randomness, v.Entrants); want != v.Seed {
			return out, fmt.Errorf("%w: secret, beacon and entrants give seed %s, the room drew with %s",
				ErrSeedMismatch, want, clip(v.Seed))
		}
	}
	out.Influence = v.Influence()
	if c.Arrival > v.Cutoff {
		return out, fmt.Errorf("%w: arrival %d, cutoff %d", ErrNotInPreQueue, c.Arrival, v.Cutoff)
	}
	out.Cutoff = v.Cutoff
	return out, nil
}

// openJWS checks tok as a compact JWS of type typ signed by a key of keys
// (header exactly alg EdDSA + kid + typ, the Ed25519 signature checked
// before anything reads the payload) and returns its header and payload,
// or why it is refused.
func openJWS(ctx context.Context, tok string, maxLen int, typ string, keys ReceiptKeys) (flashgate.Header, []byte, string) {
	var h flashgate.Header
	if keys == nil {
		return h, nil, "no keys to verify with"
	}
	if len(tok) > maxLen {
		return h, nil, "too long"
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return h, nil, "not a compact JWS"
	}
	hb, err1 := b64.DecodeString(parts[0])
	pb, err2 := b64.DecodeString(parts[1])
	sig, err3 := b64.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || len(sig) != ed25519.SignatureSize {
		return h, nil, "malformed"
	}
	if strictJSON(hb, &h) != nil {
		return h, nil, "malformed header"
	}
	switch {
	case h.Typ == flashgate.TokenType:
		return h, nil, "an admission token, not a " + typ
	case h.Typ != typ:
		return h, nil, "not a " + typ + " (typ " + strconv.Quote(clip(h.Typ)) + ")"
	case h.Alg != flashgate.Alg:
		return h, nil, "algorithm not accepted"
	}
	pub, err := keys.PublicKey(ctx, h.Kid)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return h, nil, "signed by a key that is not published (kid " + strconv.Quote(clip(h.Kid)) + ")"
	}
	if !ed25519.Verify(pub, []byte(tok[:len(parts[0])+1+len(parts[1])]), sig) {
		return h, nil, "signature invalid"
	}
	return h, pb, ""
}
