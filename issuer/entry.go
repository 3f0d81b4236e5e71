package issuer

// The Entry a buyer reads (Enter, Status) and what it carries: the wait
// estimate (etaFigures, from the script's figures: figuresOf), the poll hint
// (pollAfter) and the waiting token (format, MAC, parse).

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"math"
	mrand "math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer/store"
)

// minHistory is the least history (etaFigures.window) the measured
// slot-freeing pace needs (etaFigures.freeingPace); with less — a sale's
// first seconds — the estimate is the configured pace's (docs/rooms.md "Estimated
// wait": "falling back to the configured rate when there is no history").
const minHistory = 5 * time.Second

// etaFigures are a room's measured figures at one moment, as the scripts
// gather them (lua/prelude_eta.lua eta_figures, eta_expiry): what Entry.EstimatedWait
// is computed from, on the exact path (status and enter scripts, the
// position's own expiry) and the snapshot path (snapshot script, expiry
// interpolated from a sample) alike.
type etaFigures struct {
	now            int64 // ms: the room's clock when the figures were read
	capacity, live int64
	// admits and ends count the admission log (fg:{room}:admits) and the
	// ended records (completed, expired, not claimed, revoked, left) in the
	// last window ms; window = min(60 s, now − the room's first admission),
	// 0 before any admission.
	admits, ends, window int64
	session, batch, tick int64 // ms, admissions per tick, ms
	rate                 int64 // admissions per minute (configured)
	opens                int64 // ms: the opening time while still ahead, else 0
	configured           RoomState
	// expiry is eta_expiry's answer for the position (ms; 0: none needed).
	expiry int64
	// sample holds live expiries by rank (snapshot path; see expiryAt).
	sample []rankedExpiry
}

// rankedExpiry is the j-th earliest live expiry (ms), j 1-based.
type rankedExpiry struct{ j, at int64 }

// forPosition returns the figures of the entry at pos (0: in the pre-queue)
// from a call's shared figures f, with expiry, the position's eta_expiry
// answer (ms). The measured history (admits, ends, window) is kept only when
// pos waits for capacity (pos > 0 and j = pos − capacity + live > 0): the
// one case estimate reads it, and the one case in which a script call for
// that entry alone measures it (eta_expiry calls eta_measure). A batch
// measures once for everyone in it, so without this an entry's figures
// would depend on its neighbours in the batch.
func (f etaFigures) forPosition(pos, expiry int64) etaFigures {
	f.expiry = expiry
	if pos <= 0 || pos-f.capacity+f.live <= 0 {
		f.admits, f.ends, f.window = 0, 0, 0
	}
	return f
}

// estimate is the wait of the entry at position pos (1-based), in ms from
// f.now, for an open room (docs/rooms.md#estimated-wait):
//
//	pace = min(rate / 60 s, batch / tick)      the configured pacing (a floor: pos / pace)
//	j    = pos − capacity + live               slots that must free before pos is admitted
//	wait = max(pos / pace, slot(j))            slot(j) = 0 when j ≤ 0, else the lesser of
//	  capBound(j)                              an upper bound from the live expiries: every
//	                                           admission ends by its expiry at the latest
//	  j / freeingPace()                        the slot-freeing pace measured over the last
//	                                           minute (freeingPace)
func (f etaFigures) estimate(pos int64) time.Duration {
	if pos < 1 {
		pos = 1
	}
	pace := float64(f.rate) / 60000 // admissions per ms
	if f.batch > 0 && f.tick > 0 {
		pace = min(pace, float64(f.batch)/float64(f.tick))
	}
	if pace <= 0 {
		return -1
	}
	ms := float64(pos) / pace
	if j := pos - f.capacity + f.live; j > 0 {
		if fp, ok := f.freeingPace(); ok { // no history: the pace alone
			slot := f.capBound(j)
			if fp > 0 {
				slot = min(slot, float64(j)/fp)
			}
			ms = max(ms, slot)
		}
	}
	return time.Duration(math.Round(ms)) * time.Millisecond
}

// freeingPace is the pace slots free at, per ms, measured over the window:
// the lesser of the ended records (completions, expiries, not claimed,
// revocations, leaves) and the admissions in it, since each overstates the
// freeing in its own way (leaves of waiting users; a room's initial fill).
// ok is false with less than minHistory of history: nothing measured yet.
func (f etaFigures) freeingPace() (pace float64, ok bool) {
	if f.window < minHistory.Milliseconds() {
		return 0, false
	}
	return float64(min(f.admits, f.ends)) / float64(f.window), true
}

// capBound is the latest the j-th slot to free (j ≥ 1) frees, in ms from
// f.now, if every admission runs its whole session: the j-th earliest live
// expiry for j ≤ live; beyond, each later slot is one an admission made
// after now holds, freed at most m whole sessions after the (j − m ×
// capacity)-th live expiry, or after now for a slot free now. It mirrors
// lua/prelude_eta.lua eta_expiry, which fetched the expiry this needs.
func (f etaFigures) capBound(j int64) float64 {
	var m int64
	if j > f.live && f.capacity > 0 {
		m = (j - f.live + f.capacity - 1) / f.capacity
		j -= m * f.capacity
	}
	if j < 1 {
		return float64(m * f.session)
	}
	e := f.expiry
	if f.sample != nil {
		e = f.expiryAt(j)
	}
	return float64(max(0, e-f.now) + m*f.session)
}

// expiryAt interpolates the j-th earliest live expiry (1 ≤ j ≤ live) from
// the snapshot's sample: exact at the sampled ranks, linear between them.
func (f etaFigures) expiryAt(j int64) int64 {
	s := f.sample
	if len(s) == 0 {
		return f.now + f.session
	}
	i := sort.Search(len(s), func(i int) bool { return s[i].j >= j })
	switch {
	case i == len(s):
		return s[len(s)-1].at
	case s[i].j == j || i == 0:
		return s[i].at
	}
	a, b := s[i-1], s[i]
	return a.at + (b.at-a.at)*(j-a.j)/(b.j-a.j)
}

// wait is the estimate Entry.EstimatedWait carries for the entry at pos in
// soonest is the earliest the line could reach position pos in a room in
// state: wait by the configured pace alone, as if every slot it waits for
// freed at once (completions can free them any moment) — the floor of
// estimate, and what the poll hint (pollAfter) is taken from.
func (f etaFigures) soonest(state RoomState, pos int64) time.Duration {
	f.capacity, f.live = pos, 0 // no slot term: the pace alone
	return f.wait(state, pos)
}

// a room in state: the estimate while open; while paused before its opening
// time with an open configuration (the event window), the time until it
// opens plus the estimate then (nobody has been admitted meanwhile, so the
// figures stand); −1 otherwise (paused by the operator: no known end; closed).
func (f etaFigures) wait(state RoomState, pos int64) time.Duration {
	switch {
	case state == RoomOpen:
		return f.estimate(pos)
	case state == RoomPaused && f.configured == RoomOpen && f.opens > f.now:
		if d := f.estimate(pos); d >= 0 {
			return time.Duration(f.opens-f.now)*time.Millisecond + d
		}
	}
	return -1
}

// Entry is a client's view of its place: the answer of Enter and Status.
type Entry struct {
	Room         string
	User         string
	State        flashgate.State
	WaitingToken string
	// Arrival is the entry's arrival number in its room (1, 2, …): FIFO order.
	Arrival int64
	// Position is the 1-based place in line (WAITING only); Ahead = Position − 1.
	// Both are 0 while PreQueue is set.
	Position int64
	// PreQueue: WAITING in a shuffle room's pre-queue, the place not drawn
	// yet (RoomConfig.PreQueue): before the room opens, and until the
	// lottery has placed everyone who entered before it. EstimatedWait is
	// −1 then.
	PreQueue bool
	// PositionEstimated is true when Position was interpolated from the
	// replica's room snapshot rather than counted (ZRANK); see snapshot.go.
	PositionEstimated bool
	Ahead             int64
	TotalWaiting      int64
	// EstimatedWait is how long until the entry is admitted, from the
	// room's measured outflow (docs/rooms.md#estimated-wait, etaFigures.estimate):
	// at least Position at the configured pace (rate per minute, batch per
	// tick); when capacity is the limit, the time until enough slots free at
	// the pace slots freed (completions, expiries, leaves) over the last
	// minute, with little history leaning on a prior (a slot held half a
	// session), and never later than the live admissions' expiries allow.
	// A pre-queue entry (place not drawn) reads −1. While the room is
	// paused before its opening time (the event window, OpensAt), the time
	// until it opens plus the estimate then; −1 while it is paused by the
	// operator, or closed. Millisecond precision; 0 never means "now" for a
	// waiting entry (the head still waits for its admission step).
	EstimatedWait time.Duration
	// OpensAt is the room's opening time (RoomConfig.Opens) while it is
	// still ahead, for a countdown (WAITING only); zero once it has passed,
	// or when the room has none.
	OpensAt time.Time
	// PollAfter is when the client should ask again: half the soonest the
	// line could reach the entry, 1–30 s (10 s while paused), with ±20 %
	// jitter so waiting clients do not poll in lock-step (pollAfter).
	PollAfter time.Duration
	// AdmissionID is the jti (ACTIVE, EXPIRED; COMPLETED/REVOKED when known).
	AdmissionID string
	// AdmissionNumber is the admission order number (1, 2, …) in the room.
	AdmissionNumber int64
	AdmittedAt      time.Time
	// ExpiresAt is the admission's expiry (ACTIVE, EXPIRED), millisecond precision.
	ExpiresAt time.Time
	// EndedAt is when the entry was completed, revoked or found expired
	// (for ReasonNotClaimed: the end of the arrival window).
	EndedAt time.Time
	// BannedUntil is the end of the user's ban (REVOKED only, while the ban
	// lasts: the entry was ended by a ban or a revocation with one).
	BannedUntil time.Time
	// Reason says why an EXPIRED entry ended: ReasonNotClaimed (the
	// admission was not claimed by an exchange within the room's arrival
	// window) or ReasonSessionEnded; why a CLOSED one did: ReasonSoldOut,
	// ReasonClosed, ReasonEventEnded or ReasonDeleted; "" in every other state.
	Reason string
	// Lane is the line a WAITING entry waits in: flashgate.LanePriority
	// (entered with an invite; admitted before the public line) or
	// flashgate.LanePublic; "" in every other state.
	Lane      string
	RoomState RoomState
	// LotteryCommitment is the room's lottery commitment (LotteryCommitment:
	// SHA-256 hex) while PreQueue is set; "" otherwise, or when it could not
	// be read. Receipt is the entry's join receipt then (a compact JWS, typ
	// flashgate.ReceiptType; "" when Config.Signer does not sign receipts):
	// proof of the arrival number under that commitment, to check the drawn
	// place with once the seed is public (VerifyReceipt).
	LotteryCommitment, Receipt string
	// LotteryRandomness names the draw's randomness with the commitment
	// (RoomLottery.RandomnessName: "drand:<chain hash>" or OperatorChosen).
	LotteryRandomness string
	// Created is true when this Enter created the room from the default policy.
	Created bool
}

func (is *core) entry(room, user, tok string, r scriptEntry) *Entry {
	e := &Entry{
		Room: room, User: user,
		State:        r.state,
		Arrival:      r.seq,
		Position:     r.pos,
		TotalWaiting: r.total,
		AdmissionID:  r.jti,
		Created:      r.created,
		RoomState:    r.roomState,
		PreQueue:     r.preQueue,
	}
	if e.State == flashgate.StateExpired || e.State == flashgate.StateClosed {
		e.Reason = r.reason
	}
	if e.State == flashgate.StateWaiting {
		e.Lane = r.lane
	}
	at := r.at
	if id, ok := r.admission(); ok {
		e.AdmissionNumber, e.AdmittedAt = id.Number, id.AdmittedAt
	}
	switch e.State {
	case flashgate.StateActive:
		e.ExpiresAt = time.UnixMilli(at)
	case flashgate.StateExpired, flashgate.StateCompleted, flashgate.StateRevoked:
		e.EndedAt = time.UnixMilli(at)
	case flashgate.StateClosed:
		if at > 0 { // 0: the room's end not recorded yet, or reopened since
			e.EndedAt = time.UnixMilli(at)
		}
	}
	if e.State == flashgate.StateRevoked && r.bannedUntil > 0 {
		e.BannedUntil = time.UnixMilli(r.bannedUntil)
	}
	if e.State == flashgate.StateWaiting {
		e.Ahead = max(0, e.Position-1)
		e.EstimatedWait = -1
		soonest := time.Duration(-1)
		if r.hasETA {
			if !e.PreQueue { // a place not drawn yet has no estimate, only the countdown
				e.EstimatedWait = r.eta.wait(e.RoomState, e.Position)
				soonest = r.eta.soonest(e.RoomState, e.Position)
			}
			if r.eta.opens > 0 {
				e.OpensAt = time.UnixMilli(r.eta.opens)
			}
		}
		e.PollAfter = pollAfter(soonest)
		if e.PreQueue && e.RoomState == RoomOpen {
			e.PollAfter = pollAfter(0) // opened: the places are drawn within a tick or so
		}
	}
	switch {
	case tok != "":
		e.WaitingToken = tok
	case e.Arrival > 0 && r.epoch != "":
		if s := is.secrets.Load(); s != nil {
			e.WaitingToken = s.current.token(room, user, r.epoch, e.Arrival)
		}
	}
	return e
}

// Reasons of an EXPIRED entry (Entry.Reason).
const (
	// ReasonNotClaimed: admitted, but not claimed (exchanged) within the
	// room's arrival window; the slot went to the next in line.
	ReasonNotClaimed = "not_claimed"
	// ReasonSessionEnded: the admission ran its whole session.
	ReasonSessionEnded = "session_ended"
)

// Reasons of a CLOSED entry (Entry.Reason) and of a room's end
// (RoomConfig.CloseReason): why the line the entry was in ended.
const (
	// ReasonSoldOut: the operator declared the sale sold out (SoldOut).
	ReasonSoldOut = "sold_out"
	// ReasonClosed: the operator closed the room (Close, SetState).
	ReasonClosed = "closed"
	// ReasonEventEnded: the room's event window closed (RoomConfig.Closes).
	ReasonEventEnded = "event_ended"
	// ReasonDeleted: the room was deleted (DeleteRoom, or idle as an auto room).
	ReasonDeleted = "deleted"
)

// pollAfter chooses the next poll from soonest, the earliest the line could
// reach the entry (etaFigures.soonest; −1: unknown): half of it, clamped to
// 1 s … 30 s (10 s when unknown, e.g. paused), times a uniform jitter in
// [0.8, 1.2). Not from the estimate: a capacity-bound room's estimate waits
// for slots to free, but a completion can free one at any moment, and an
// admitted buyer who has not looked yet holds a slot for nothing.
func pollAfter(soonest time.Duration) time.Duration {
	base := 10 * time.Second
	if soonest >= 0 {
		base = min(max(soonest/2, time.Second), 30*time.Second)
	}
	return time.Duration(float64(base) * (0.8 + 0.4*mrand.Float64())).Round(time.Millisecond)
}

// figuresOf returns the estimate's figures of f at rate; ok is false when
// the script gave none (a closed room).
func figuresOf(f store.Figures, rate int64) (etaFigures, bool) {
	if !f.OK {
		return etaFigures{}, false
	}
	return etaFigures{now: f.NowMs, capacity: f.Capacity, live: f.Live, admits: f.Admits, ends: f.Ends,
		window: f.WindowMs, session: f.SessionMs, batch: f.Batch, tick: f.TickMs, opens: f.OpensMs,
		configured: RoomState(f.Configured), rate: rate, expiry: f.ExpiryMs}, true
}

// Waiting tokens are not JWTs: "fgw2_<sid>_<epoch>_<seq>_<mac>", where
//   - sid names the secret that keyed the MAC: base64url(SHA-256(secret)[:3]),
//     4 characters, so a replica tells "minted under a secret I do not hold"
//     (a token from before a Redis data loss or a secret change: NOT_FOUND)
//     from "minted for someone else" (flashgate.ErrOwnerMismatch);
//   - epoch is the room's epoch when the entry was created (lua/prelude.lua):
//     after a data loss the room has a new one, and the token reads NOT_FOUND
//     instead of whatever entry now has its arrival number (invariant 6);
//   - seq is the entry's arrival number;
//   - mac = base64url(HMAC-SHA256(secret, "fgw2" ‖ room ‖ user ‖ epoch ‖ seq)[:16]),
//     each field length-prefixed.
//
// They are
//   - unguessable: forging one needs the 128-bit MAC;
//   - bound to (room, user): the MAC is checked against the caller's user id,
//     so another user's token fails with flashgate.ErrOwnerMismatch;
//   - never admission tokens: no dots, so the verifier refuses them as
//     malformed before any decoding, and they are keyed by a secret that is
//     not a signing key.
//
// Redis stores only seq, which keeps a waiting user at one ZSET member.
const waitingPrefix = "fgw2_"

// MaxWaitingTokenLen bounds a waiting token; longer input is refused unread.
const MaxWaitingTokenLen = 80

// strictB64 rejects non-zero trailing bits (Strict copies the encoding, so
// make it once).
var strictB64 = base64.RawURLEncoding.Strict()

// macPool holds keyed HMAC-SHA256 states for one secret: Reset restores the
// keyed state, so a status poll does not rebuild the key schedule.
type macPool struct {
	secret []byte
	sid    string // secretID(secret)
	pool   sync.Pool
}

func newMACPool(secret []byte) *macPool {
	p := &macPool{secret: secret, sid: secretID(secret)}
	p.pool.New = func() any { return &macState{h: hmac.New(sha256.New, secret)} }
	return p
}

// secretID is the 4-character public name of a waiting-token secret:
// base64url of the first 3 bytes of its SHA-256 (24 bits of a hash of a
// 256-bit secret reveal nothing usable).
func secretID(secret []byte) string {
	sum := sha256.Sum256(secret)
	return base64.RawURLEncoding.EncodeToString(sum[:3])
}

// mac returns the first 16 bytes of HMAC-SHA256 over the length-prefixed
// fields "fgw2", room, user, epoch, seq.
//
// The fields go to the hash in one Write, from the pooled state's buffer
// (valid ids, ValidID, fit it without growing it): a status or an enter
// computes one MAC each, without an allocation.
func (p *macPool) mac(room, user, epoch string, seq int64) [16]byte {
	st := p.pool.Get().(*macState)
	msg := st.buf[:0]
	field := func(f string) {
		msg = append(strconv.AppendInt(msg, int64(len(f)), 10), ':')
		msg = append(msg, f...)
	}
	field("fgw2")
	field(room)
	field(user)
	field(epoch)
	var digits [20]byte
	seqs := strconv.AppendInt(digits[:0], seq, 10)
	msg = append(strconv.AppendInt(msg, int64(len(seqs)), 10), ':')
	msg = append(msg, seqs...)
	st.h.Reset()
	st.h.Write(msg)
	var out [16]byte
	copy(out[:], st.h.Sum(st.buf[:0]))
	p.pool.Put(st)
	return out
}

// macState is one pooled keyed HMAC state and its message buffer.
type macState struct {
	h   hash.Hash
	buf [384]byte
}

func (p *macPool) token(room, user, epoch string, seq int64) string {
	mac := p.mac(room, user, epoch, seq)
	return waitingPrefix + p.sid + "_" + epoch + "_" + strconv.FormatInt(seq, 10) + "_" +
		base64.RawURLEncoding.EncodeToString(mac[:])
}

// waitingRef is what a verified waiting token names: an entry of a room's epoch.
type waitingRef struct {
	epoch string
	seq   int64
}

// secretSet is the waiting-token secrets a replica holds: the current one
// mints, and every one it has held (at most maxSecrets, newest first)
// verifies. Replaced whole (copy on write) when the shared secret changes.
type secretSet struct {
	current *macPool
	all     []*macPool
}

// maxSecrets bounds the secrets a replica keeps verifying with.
const maxSecrets = 4

func newSecretSet(secret []byte) *secretSet {
	p := newMACPool(secret)
	return &secretSet{current: p, all: []*macPool{p}}
}

// adopt returns the set with secret as the current one, keeping the others.
func (s *secretSet) adopt(secret []byte) *secretSet {
	p := newMACPool(secret)
	out := &secretSet{current: p, all: []*macPool{p}}
	for _, q := range s.all {
		if q.sid != p.sid && len(out.all) < maxSecrets {
			out.all = append(out.all, q)
		}
	}
	return out
}

func (s *secretSet) bySID(sid string) *macPool {
	for _, p := range s.all {
		if p.sid == sid {
			return p
		}
	}
	return nil
}

// errUnknownSecret marks a well-formed waiting token keyed by a secret this
// replica does not hold: minted before a data loss or a secret change. The
// entry it named is gone, so callers answer NOT_FOUND (never flashgate.ErrOwnerMismatch).
var errUnknownSecret = flashgate.Errorf(flashgate.CodeNotFound, "waiting token from before the queue store was reset: enter again")

// parse checks tok's form and MAC for (room, user) and returns the entry it
// names. A well-formed token whose MAC fails is reported as flashgate.ErrOwnerMismatch:
// it was minted for another user (or forged); one keyed by a secret this
// replica does not hold is errUnknownSecret, returned with the (unverified)
// entry it names.
func (s *secretSet) parse(room, user, tok string) (waitingRef, error) {
	bad := func() (waitingRef, error) {
		return waitingRef{}, flashgate.Errorf(flashgate.CodeBadWaiting, "not a waiting token")
	}
	if len(tok) > MaxWaitingTokenLen || !strings.HasPrefix(tok, waitingPrefix) {
		return bad()
	}
	// Positional: the sid and the MAC are base64url, whose alphabet has '_'.
	rest := tok[len(waitingPrefix):]
	if len(rest) < 5 || rest[4] != '_' {
		return bad()
	}
	sid, rest := rest[:4], rest[5:]
	epoch, rest, ok1 := strings.Cut(rest, "_")
	seqs, m, ok2 := strings.Cut(rest, "_")
	var sb [3]byte
	if !ok1 || !ok2 || !flashgate.ValidEpoch(epoch) {
		return bad()
	} else if n, err := strictB64.Decode(sb[:], unsafe.Slice(unsafe.StringData(sid), 4)); err != nil || n != 3 {
		return bad()
	}
	seq, err := strconv.ParseInt(seqs, 10, 64)
	if err != nil || seq <= 0 || len(seqs) > 19 || strconv.FormatInt(seq, 10) != seqs {
		return bad()
	}
	var mac [16]byte
	if len(m) != 22 {
		return bad()
	} else if n, err := strictB64.Decode(mac[:], unsafe.Slice(unsafe.StringData(m), len(m))); err != nil || n != 16 {
		return bad()
	}
	p := s.bySID(sid)
	if p == nil {
		return waitingRef{epoch: epoch, seq: seq}, errUnknownSecret // what it names, unverified
	}
	want := p.mac(room, user, epoch, seq)
	if !hmac.Equal(mac[:], want[:]) {
		return waitingRef{}, flashgate.Errorf(flashgate.CodeOwnerMismatch, "token owner mismatch: the waiting token was not issued to this user in room %q", room)
	}
	return waitingRef{epoch: epoch, seq: seq}, nil
}
