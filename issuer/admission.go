package issuer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer/store"
)

// Admission is a minted admission token and what it carries.
type Admission struct {
	Token     string    // compact JWS
	ID        string    // jti
	Room      string    // product claim
	User      string    // sub
	Number    int64     // admission order number
	IssuedAt  time.Time // iat (second precision)
	ExpiresAt time.Time // exp (second precision, = the active entry's expiry, floored)
}

// Exchange trades an ACTIVE entry's waiting token for an admission token
// (EdDSA JWT, exp = the active entry's expiry: admitted at + session). It
// claims the admission, atomically with reading it (lua/status.lua): an
// admission not claimed within the room's arrival window ends early
// (EXPIRED, reason not_claimed) and is refused here; a claimed one lasts its
// session — the claim extends nothing. Re-minting the same admission gives
// the same jti and exp (and, with the same key, the same token).
//
// Errors: those of Status, plus flashgate.ErrNotAdmitted (still waiting: a
// *NotAdmittedError carrying the WAITING entry), flashgate.ErrExpired (also
// not claimed in time),
// flashgate.ErrCompleted, flashgate.ErrRevoked, flashgate.ErrRoomClosed (the
// entry is CLOSED: the room closed while it waited), flashgate.ErrNotFound,
// flashgate.ErrInternal (no signer, sign failure).
func (is *Queue) Exchange(ctx context.Context, room, user, waitingToken string) (*Admission, error) {
	ref, err := is.checkWaiting(room, user, waitingToken)
	if err != nil {
		return nil, err
	}
	e, err := is.statusOrClaim(ctx, room, user, waitingToken, ref, true)
	if err != nil {
		return nil, err
	}
	switch e.State {
	case flashgate.StateActive:
	case flashgate.StateWaiting:
		return nil, &NotAdmittedError{Entry: e, Err: flashgate.Errorf(flashgate.CodeNotAdmitted,
			"not admitted yet: position %d of %d", e.Position, e.TotalWaiting)}
	case flashgate.StateExpired:
		if e.Reason == ReasonNotClaimed {
			return nil, flashgate.Errorf(flashgate.CodeExpired, "admission expired: not claimed within the arrival window")
		}
		return nil, flashgate.Errorf(flashgate.CodeExpired, "admission expired")
	case flashgate.StateCompleted:
		return nil, flashgate.Errorf(flashgate.CodeCompleted, "admission already completed")
	case flashgate.StateRevoked:
		return nil, flashgate.Errorf(flashgate.CodeRevoked, "admission revoked")
	case flashgate.StateClosed:
		return nil, flashgate.Errorf(flashgate.CodeRoomClosed, "the line was closed before this entry's turn (%s)", e.Reason)
	default:
		return nil, flashgate.Errorf(flashgate.CodeNotFound, "no entry for this waiting token")
	}
	if is.cfg.Signer == nil {
		return nil, flashgate.Errorf(flashgate.CodeInternal, "issuer: Config.Signer is not set")
	}
	a := &Admission{ID: e.AdmissionID, Room: room, User: user, Number: e.AdmissionNumber,
		IssuedAt:  time.Unix(e.AdmittedAt.Unix(), 0),
		ExpiresAt: time.Unix(e.ExpiresAt.Unix(), 0)}
	payload := flashgate.NewClaims(is.cfg.Issuer, is.cfg.Audience, user, room, a.ID, a.IssuedAt, a.ExpiresAt).JSON()
	if a.Token, err = is.cfg.Signer.Sign(payload); err != nil {
		return nil, &flashgate.Error{Code: flashgate.CodeInternal, Message: "sign admission token", Err: err}
	}
	is.noteMinted(room, a)
	return a, nil
}

// MintedDigest is the digest of an admission token that Exchange notes in
// Redis when it mints the token and CompleteMinted compares: the lowercase
// hex of the first 16 bytes of the SHA-256 of the compact token (32
// characters). 128 bits: finding another token with a noted digest (a second
// preimage) takes about 2^128 hashes.
func MintedDigest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:16])
}

// mintedNoteTimeout bounds one write of minted notes (writeMintedNotes):
// notes that do not land by then are dropped.
const mintedNoteTimeout = 2 * time.Second

// Minted notes queue for the writer (noteMinted, writeMintedNotes).
const (
	// maxQueuedNotes bounds the notes waiting for the writer; a note that
	// finds the queue full is dropped (counted as lost).
	maxQueuedNotes = 8192
	// maxNotesPerWrite bounds the notes one write takes from the queue.
	maxNotesPerWrite = 512
	// noteWriterIdle is how long the writer waits for a note before it
	// stops (the next note starts it again).
	noteWriterIdle = time.Second
	// noteLinger is how long the writer lets notes gather after the first
	// of a write: the exchanges of a busy room then share a call (and its
	// round trip) instead of paying one each. Nobody waits for it.
	noteLinger = 2 * time.Millisecond
)

// mintedItem is one minted token's note: its key's jti, its digest, and
// how long it lives (ms: until the token's exp).
type mintedItem struct {
	jti, digest string
	ttlMs       int64
}

// mintedNote is a mintedItem queued for the writer, with its room (the
// room's coalescers' copy: never a caller's buffer).
type mintedNote struct {
	room string
	item mintedItem
}

// noteMinted queues a's note — its digest (MintedDigest) under its minted
// key, expiring with the token by the issuer's clock — for the writer
// (writeMintedNotes), and starts the writer when it is not running. The
// exchange does not wait: queuing is a channel send. A note that is lost —
// the queue full, Redis unavailable, the process stopping, a completion
// faster than the note — costs nothing but the signature check of that
// token's completion (CompleteMinted's ErrNotMinted); lost notes are
// counted (Observation.MintedNotesLost).
func (is *Queue) noteMinted(room string, a *Admission) {
	// A TTL, not Redis's clock: exp is on the issuer's (Config.Now).
	ttl := a.ExpiresAt.Sub(is.now()).Milliseconds()
	if ttl <= 0 {
		return // expired already: completing it is refused anyway
	}
	// a.ID and a.Token are the issuer's own strings (script reply, signer).
	n := mintedNote{room: is.statusBatch(room).room, item: mintedItem{jti: a.ID, digest: MintedDigest(a.Token), ttlMs: ttl}}
	is.minting.Add(1)
	select {
	case is.notes <- n:
	default:
		is.mintedLost.Add(1)
		is.minting.Done()
		return
	}
	if is.noteWriter.CompareAndSwap(false, true) {
		go is.writeMintedNotes()
	}
}

// writeMintedNotes is the writer of minted notes: it takes what is queued
// (up to maxNotesPerWrite notes, after waiting for the first and then
// noteLinger), writes each
// room's notes in one lua/minted.lua call, and goes on until no note came
// for noteWriterIdle. One writer runs at a time (noteWriter), so the notes
// of a burst of exchanges share calls without a goroutine or a wake-up per
// note.
func (is *Queue) writeMintedNotes() {
	idle := time.NewTimer(noteWriterIdle)
	defer idle.Stop()
	batch := make([]mintedNote, 0, maxNotesPerWrite)
	for {
		select {
		case n := <-is.notes:
			batch = append(batch[:0], n)
			time.Sleep(noteLinger)
		case <-idle.C:
			is.noteWriter.Store(false)
			// A note queued after the last receive saw the writer running:
			// take it over unless a new writer already has.
			if len(is.notes) == 0 || !is.noteWriter.CompareAndSwap(false, true) {
				return
			}
			idle.Reset(noteWriterIdle)
			continue
		}
	drain:
		for len(batch) < maxNotesPerWrite {
			select {
			case n := <-is.notes:
				batch = append(batch, n)
			default:
				break drain
			}
		}
		is.writeNotes(batch)
		if !idle.Stop() {
			select {
			case <-idle.C:
			default:
			}
		}
		idle.Reset(noteWriterIdle)
	}
}

// writeNotes writes batch, one call per room (in the order of each room's
// first note), counting the notes of failed calls as lost.
func (is *Queue) writeNotes(batch []mintedNote) {
	ctx, cancel := context.WithTimeout(context.Background(), mintedNoteTimeout)
	defer cancel()
	for len(batch) > 0 {
		room := batch[0].room
		items := make([]mintedItem, 0, len(batch))
		rest := batch[:0]
		for _, n := range batch {
			if n.room == room {
				items = append(items, n.item)
			} else {
				rest = append(rest, n)
			}
		}
		if err := is.mintedItems(ctx, room, items); err != nil {
			is.mintedLost.Add(int64(len(items)))
		}
		for range items {
			is.minting.Done()
		}
		batch = rest
	}
}

// WaitMinted waits until the minted notes in flight (see CompleteMinted)
// have landed or been dropped, or until ctx ends (then ctx's error): at a
// graceful shutdown, so the tokens minted last are known as minted too.
func (is *Queue) WaitMinted(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		is.minting.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// mintedItems writes items' notes, all of room (lua/minted.lua): one call.
// Errors: flashgate.ErrUnavailable, flashgate.ErrStoreFull.
func (is *Queue) mintedItems(ctx context.Context, room string, items []mintedItem) error {
	notes := make([]store.MintedNote, len(items))
	for i, it := range items {
		notes[i] = store.MintedNote{JTI: it.jti, Digest: it.digest, TTLms: it.ttlMs}
	}
	return is.db.Minted(ctx, room, notes)
}

// Complete consumes an admission atomically: still active and unexpired →
// consumed, and the user may queue again. Callers pass the claims of an
// admission token they have verified (verifier.Verify): room = product,
// user = sub, admissionID = jti. Replay protection keys on jti, never on the
// token string.
//
// An admission issued before the room's not_before (Stop) is refused with
// flashgate.CodeRoomStopped, at once: the script compares the admitted-at
// time in the admission id with the not_before the stop wrote to the room's
// config, so it needs no edge directive fetch.
//
// Errors: flashgate.ErrInvalidInput, flashgate.ErrUnknownRoom, flashgate.ErrExpired, flashgate.ErrRevoked,
// flashgate.ErrNotFound (unknown, left), flashgate.ErrOwnerMismatch, flashgate.ErrUnavailable,
// and an error of code flashgate.CodeRoomStopped.
func (is *Queue) Complete(ctx context.Context, room, user, admissionID string) (*flashgate.Completion, error) {
	return is.complete(ctx, room, user, admissionID, "")
}

// CompleteMinted is Complete for an admission token whose signature the
// caller has not checked, in place of that check: token is the compact
// token, and room, user and admissionID its claims, which passed every other
// check of verifier.Verify (verifier.Pending.InsecureClaims). The admission is
// completed only when token is byte for byte the one Exchange minted for it
// (its MintedDigest equals the note Exchange left in Redis, compared in the
// same script that completes): such a token is authentic, since only the
// issuer writes notes, and only of tokens it signed. For any other token —
// forged, altered, minted before the note landed or by a replica that does
// not note — it returns ErrNotMinted having read and changed nothing; the
// caller then verifies the signature and calls Complete. This spares
// /v1/complete the Ed25519 arithmetic for the tokens this issuer minted
// (docs/security.md#security-model).
//
// Errors: the admission's answers of Complete once the token is known as
// minted (flashgate.ErrNotFound, flashgate.ErrExpired, flashgate.ErrRevoked,
// flashgate.ErrOwnerMismatch, flashgate.CodeRoomStopped); anything else is ErrNotMinted, wrapping the
// cause when there is one (a malformed claim, flashgate.ErrUnknownRoom,
// flashgate.ErrUnavailable, …): the token was not shown authentic, so the
// caller's signature check decides first, exactly as without this path.
func (is *Queue) CompleteMinted(ctx context.Context, room, user, admissionID, token string) (*flashgate.Completion, error) {
	// complete refuses a malformed jti as not_found, which reads like the
	// script's answer for an admission: refused here first, as not minted.
	// A malformed room or user comes back as ErrInvalidInput, no answer.
	if _, ok := flashgate.ParseAdmissionID(admissionID); !ok {
		return nil, ErrNotMinted
	}
	c, err := is.complete(ctx, room, user, admissionID, MintedDigest(token))
	if err == nil || errors.Is(err, ErrNotMinted) {
		return c, err
	}
	switch flashgate.ErrorCode(err) {
	case flashgate.CodeNotFound, flashgate.CodeExpired, flashgate.CodeRevoked, flashgate.CodeOwnerMismatch, flashgate.CodeRoomStopped:
		return nil, err // the script's answer for this admission, given after the digest matched
	}
	return nil, fmt.Errorf("%w (%w)", ErrNotMinted, err) // the whole call failed: nothing is known
}

// complete is Complete (digest "") and CompleteMinted.
func (is *Queue) complete(ctx context.Context, room, user, admissionID, digest string) (*flashgate.Completion, error) {
	if err := checkRoom(room); err != nil {
		return nil, err
	}
	if err := checkUser(user); err != nil {
		return nil, err
	}
	if _, ok := flashgate.ParseAdmissionID(admissionID); !ok {
		return nil, flashgate.Errorf(flashgate.CodeNotFound, "unknown admission id %q", clip(admissionID))
	}
	c, err := is.completeBatch(room).call(ctx, completeItem{user: user, jti: admissionID, digest: digest},
		func(it completeItem) completeItem {
			return completeItem{strings.Clone(it.user), strings.Clone(it.jti), it.digest} // digest: ours
		})
	if err != nil {
		return nil, err
	}
	return &flashgate.Completion{AdmissionID: admissionID, CompletedAt: c.at, Repeated: c.repeated}, nil
}

// completeItem is one admission in a complete script call: the token's
// sub and jti, and its MintedDigest when its signature was not checked
// (CompleteMinted; "" for Complete).
type completeItem struct{ user, jti, digest string }

// completeItems runs the complete script for items, in that order (one
// call, followed by WAIT under CompletionReplicas: runReplicated), and
// decodes its reply (decodeComplete: each item's own refusal is its
// outcome's error). Errors of the whole call: flashgate.ErrUnknownRoom,
// flashgate.ErrRoomLost, flashgate.ErrUnavailable (Redis, or too few
// replicas acknowledged the write).
func (is *Queue) completeItems(ctx context.Context, room string, items []completeItem) ([]outcome[completeReply], error) {
	args := make([]store.CompleteItem, len(items))
	for i, it := range items {
		args[i] = store.CompleteItem{User: it.user, JTI: it.jti, Digest: it.digest}
	}
	is.batchStats.complete.add(len(items))
	r, err := is.db.Complete(ctx, room, args)
	if err != nil {
		return nil, err
	}
	return completions(r), nil
}

// CheckActive asks Redis (one ZSCORE, and the room's clock) whether the
// admission admissionID in room is still live: nil if so; ErrNotFound when it
// is no longer in the active set (revoked, completed, left, or expired and
// cleaned up), ErrExpired when it has lapsed by the room's clock (Redis TIME,
// or Config.Now when set — never the caller's clock), an error of code
// flashgate.CodeRoomStopped when it was admitted before the room's not_before
// (Stop), ErrInvalidInput for a malformed room id, ErrUnavailable when Redis
// cannot answer (fail closed).
func (is *Queue) CheckActive(ctx context.Context, room, admissionID string) error {
	if err := checkRoom(room); err != nil {
		return err
	}
	if _, ok := flashgate.ParseAdmissionID(admissionID); !ok {
		return flashgate.Errorf(flashgate.CodeNotFound, "unknown admission id %q", clip(admissionID))
	}
	v, err := is.db.Active(ctx, room, admissionID)
	if err != nil {
		return err
	}
	switch v {
	case store.ActiveLive:
		return nil
	case store.ActiveExpired:
		return flashgate.Errorf(flashgate.CodeExpired, "admission expired")
	default: // activeGone
		return flashgate.Errorf(flashgate.CodeNotFound, "admission %q is no longer active", clip(admissionID))
	}
}

// Revocation is the result of Revoke.
type Revocation struct {
	AdmissionID string
	RevokedAt   time.Time
	Repeated    bool
	// BannedUntil is the end of the ban that came with the revocation
	// (zero: none).
	BannedUntil time.Time
}

// RevokeOptions are Revoke's optional settings.
type RevokeOptions struct {
	// Ban is how long the user may not enter again, banned in the same atomic
	// step as the revocation (see Ban): nil for the room's session duration
	// (the default: a revoked user cannot enter again at once and be
	// admitted), 0 for no ban, else 1 ms … MaxBan. A ban needs the user: a
	// revocation by admission id alone bans nobody, and an explicit Ban > 0
	// without a user is flashgate.ErrInvalidInput.
	Ban *time.Duration
	// Reason is the ban's reason (see Ban).
	Reason string
}

// Revoke ends an admission early, named by admission id (jti) or by user
// (their current admission), and — when the user is named — bans the user
// for the room's session duration in the same step (RevokeWith sets another
// ban, or none). Later completions of its token are refused. Errors:
// flashgate.ErrInvalidInput, flashgate.ErrUnknownRoom, flashgate.ErrNotFound,
// flashgate.ErrCompleted, flashgate.ErrUnavailable.
func (is *Admin) Revoke(ctx context.Context, room, user, admissionID string) (*Revocation, error) {
	return is.RevokeWith(ctx, room, user, admissionID, RevokeOptions{})
}

// RevokeWith is Revoke with options: the ban that comes with it.
func (is *Admin) RevokeWith(ctx context.Context, room, user, admissionID string, o RevokeOptions) (*Revocation, error) {
	if err := checkRoom(room); err != nil {
		return nil, err
	}
	if user == "" && admissionID == "" {
		return nil, flashgate.Errorf(flashgate.CodeInvalidInput, "revoke needs a user or an admission id")
	}
	if user != "" {
		if err := checkUser(user); err != nil {
			return nil, err
		}
	}
	if admissionID != "" {
		if _, ok := flashgate.ParseAdmissionID(admissionID); !ok {
			return nil, flashgate.Errorf(flashgate.CodeNotFound, "unknown admission id %q", clip(admissionID))
		}
	}
	ban := "" // the room's session duration
	if o.Ban != nil {
		switch d := *o.Ban; {
		case d == 0:
			ban = "0"
		case user == "":
			return nil, flashgate.Errorf(flashgate.CodeInvalidInput, "a ban needs the user: name the user to revoke and ban")
		default:
			if err := checkBan(d, o.Reason); err != nil {
				return nil, err
			}
			ban = strconv.FormatInt(d.Milliseconds(), 10)
		}
	} else if err := checkBan(time.Millisecond, o.Reason); err != nil {
		return nil, err
	}
	v, err := is.db.Revoke(ctx, room, store.RevokeArgs{User: user, JTI: admissionID, Ban: ban, Reason: o.Reason})
	if err != nil {
		return nil, err
	}
	rv := &Revocation{AdmissionID: v.JTI, RevokedAt: time.UnixMilli(v.AtMs), Repeated: v.Repeated}
	if v.BannedUntilMs > 0 {
		rv.BannedUntil = time.UnixMilli(v.BannedUntilMs)
	}
	return rv, nil
}

// completeBatch returns room's complete coalescer.
func (is *Queue) completeBatch(room string) *coalescer[completeItem, completeReply] {
	return batchOf(&is.completeBatchers, room, is.cfg.ScriptBatch, func(room string) func(context.Context, []completeItem) ([]outcome[completeReply], error) {
		return func(ctx context.Context, items []completeItem) ([]outcome[completeReply], error) {
			return is.completeItems(ctx, room, items)
		}
	})
}
