package issuer

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/flashgate/flashgate"
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
func (is *Issuer) Exchange(ctx context.Context, room, user, waitingToken string) (*Admission, error) {
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
	return a, nil
}

// Complete consumes an admission atomically: still active and unexpired →
// consumed, and the user may queue again. Callers pass the claims of an
// admission token they have verified (verifier.Verify): room = product,
// user = sub, admissionID = jti. Replay protection keys on jti, never on the
// token string.
//
// Errors: flashgate.ErrInvalidInput, flashgate.ErrUnknownRoom, flashgate.ErrExpired, flashgate.ErrRevoked,
// flashgate.ErrNotFound (unknown, left), flashgate.ErrOwnerMismatch, flashgate.ErrUnavailable.
func (is *Issuer) Complete(ctx context.Context, room, user, admissionID string) (*flashgate.Completion, error) {
	if err := checkRoom(room); err != nil {
		return nil, err
	}
	if err := checkUser(user); err != nil {
		return nil, err
	}
	if _, ok := flashgate.ParseAdmissionID(admissionID); !ok {
		return nil, flashgate.Errorf(flashgate.CodeNotFound, "unknown admission id %q", clip(admissionID))
	}
	c, err := is.roomBatch(room).complete.call(ctx, completeItem{user: user, jti: admissionID},
		func(it completeItem) completeItem { return completeItem{strings.Clone(it.user), strings.Clone(it.jti)} })
	if err != nil {
		return nil, err
	}
	return &flashgate.Completion{AdmissionID: admissionID, CompletedAt: c.at, Repeated: c.repeated}, nil
}

// completeItem is one admission in a complete script call: the token's
// sub and jti.
type completeItem struct{ user, jti string }

// completeItems runs the complete script for items, in that order (one
// call, followed by WAIT under CompletionReplicas: runReplicated), and
// decodes its reply (decodeComplete: each item's own refusal is its
// outcome's error). Errors of the whole call: flashgate.ErrUnknownRoom,
// flashgate.ErrRoomLost, flashgate.ErrUnavailable (Redis, or too few
// replicas acknowledged the write).
func (is *Issuer) completeItems(ctx context.Context, room string, items []completeItem) ([]outcome[completeReply], error) {
	args := make([]any, 0, 2*len(items))
	for _, it := range items {
		args = append(args, it.user, it.jti)
	}
	is.batchStats.complete.add(len(items))
	r, err := is.runReplicated(ctx, completeScript, room, args...)
	if err != nil {
		return nil, err
	}
	return decodeComplete(r, len(items), room)
}

// CheckActive asks Redis (one ZSCORE, and the room's clock) whether the
// admission admissionID in room is still live: nil if so; ErrNotFound when it
// is no longer in the active set (revoked, completed, left, or expired and
// cleaned up), ErrExpired when it has lapsed by the room's clock (Redis TIME,
// or Config.Now when set — never the caller's clock), ErrInvalidInput for a
// malformed room id, ErrUnavailable when Redis cannot answer (fail closed).
func (is *Issuer) CheckActive(ctx context.Context, room, admissionID string) error {
	if err := checkRoom(room); err != nil {
		return err
	}
	if _, ok := flashgate.ParseAdmissionID(admissionID); !ok {
		return flashgate.Errorf(flashgate.CodeNotFound, "unknown admission id %q", clip(admissionID))
	}
	r, err := is.run(ctx, activeScript, room, admissionID)
	if err != nil {
		return err
	}
	switch decodeActive(r) {
	case activeLive:
		return nil
	case activeExpired:
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
func (is *Issuer) Revoke(ctx context.Context, room, user, admissionID string) (*Revocation, error) {
	return is.RevokeWith(ctx, room, user, admissionID, RevokeOptions{})
}

// RevokeWith is Revoke with options: the ban that comes with it.
func (is *Issuer) RevokeWith(ctx context.Context, room, user, admissionID string, o RevokeOptions) (*Revocation, error) {
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
	r, err := is.runReplicated(ctx, revokeScript, room, user, admissionID, ban, o.Reason)
	if err != nil {
		return nil, err
	}
	v := decodeRevoke(r)
	rv := &Revocation{AdmissionID: v.jti, RevokedAt: v.at, Repeated: v.repeated}
	if v.bannedUntil > 0 {
		rv.BannedUntil = time.UnixMilli(v.bannedUntil)
	}
	return rv, nil
}
