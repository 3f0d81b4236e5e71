package issuer

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"time"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer/store"
)

// InviteKeys signs invites and resolves the keys that verify them: the
// admission key ring (keys.Ring and keys.FileRing implement it). An invite
// is signed with the ring's active key and verifies while its key is
// published (active, next, or retired before its retire_until).
type InviteKeys interface {
	// SignInvite signs an invite's claims (flashgate.InviteClaims.JSON) as a
	// compact JWS with the header flashgate.InviteHeader(kid).
	SignInvite(payload []byte) (string, error)
	// PublicKey returns the public key named by kid, or an error for a key
	// the ring does not publish.
	PublicKey(ctx context.Context, kid string) (ed25519.PublicKey, error)
}

// Bounds of invites (docs/rooms.md#priority-lanes-and-invites).
const (
	// MaxInviteTTL is the longest an invite may stay valid: 30 days.
	MaxInviteTTL = 30 * 24 * time.Hour
	// MaxInvites is the most invites one Invites call signs.
	MaxInvites = 1000
	// MaxInviteLen bounds an invite token; longer input is refused unread.
	MaxInviteLen = 2048
	// DefaultInviteTTL is an invite's validity when InviteOptions sets none.
	DefaultInviteTTL = 24 * time.Hour
)

// InviteOptions says what invites Invites signs.
type InviteOptions struct {
	// Lane is flashgate.LanePriority (the default when "") or flashgate.LaneBypass.
	Lane string
	// User binds each invite to one user id; "" lets anyone who holds it use it.
	User string
	// ExpiresAt is the invites' expiry; zero means now + TTL.
	ExpiresAt time.Time
	// TTL is the invites' validity from now when ExpiresAt is zero; zero
	// means DefaultInviteTTL (24 h). At most MaxInviteTTL either way.
	TTL time.Duration
	// Reusable lets each invite be used by any number of enters until it
	// expires. The default (false) is single use: the first enter with it
	// takes a place in its room; a later one, by anyone holding no place
	// from it, is refused with flashgate.ErrInviteUsed — so one leaked or
	// forwarded link moves one holder into the lane, not a crowd.
	Reusable bool
	// Count is how many invites to sign (each with its own id); zero means 1,
	// at most MaxInvites.
	Count int
}

// Invite is one signed invite.
type Invite struct {
	Token     string // compact JWS (typ flashgate-invite+jwt)
	ID        string // jti: 128 random bits, base64url
	Room      string
	Lane      string
	User      string // "" when unbound
	SingleUse bool
	IssuedAt  time.Time // second precision
	ExpiresAt time.Time // second precision
}

// NewInvites signs o.Count invites to room with k, issued by iss (the
// admission tokens' iss: the issuer that verifies them must have the same
// Config.Issuer) at now. It needs no queue store: `flashgate invite` signs
// with the key ring file alone. Errors: flashgate.ErrInvalidInput (room,
// user, lane, expiry, count), flashgate.ErrInternal (signing failed).
func NewInvites(k InviteKeys, iss, room string, o InviteOptions, now time.Time) ([]Invite, error) {
	if err := checkRoom(room); err != nil {
		return nil, err
	}
	if o.User != "" {
		if err := checkUser(o.User); err != nil {
			return nil, err
		}
	}
	if o.Lane == "" {
		o.Lane = flashgate.LanePriority
	}
	if o.Lane != flashgate.LanePriority && o.Lane != flashgate.LaneBypass {
		return nil, flashgate.Errorf(flashgate.CodeInvalidInput, "lane must be %q or %q, got %q",
			flashgate.LanePriority, flashgate.LaneBypass, clip(o.Lane))
	}
	exp := o.ExpiresAt
	if exp.IsZero() {
		ttl := o.TTL
		if ttl == 0 {
			ttl = DefaultInviteTTL
		}
		exp = now.Add(ttl)
	}
	exp = time.Unix(exp.Unix(), 0)
	if !exp.After(now) || exp.Sub(now) > MaxInviteTTL {
		return nil, flashgate.Errorf(flashgate.CodeInvalidInput, "an invite expires 1 s … %s (30 days) from now, not at %s",
			MaxInviteTTL, exp.UTC().Format(time.RFC3339))
	}
	if o.Count == 0 {
		o.Count = 1
	}
	if o.Count < 1 || o.Count > MaxInvites {
		return nil, flashgate.Errorf(flashgate.CodeInvalidInput, "count must be 1 … %d, got %d", MaxInvites, o.Count)
	}
	if k == nil {
		return nil, flashgate.Errorf(flashgate.CodeInternal, "issuer: no invite keys (Config.Invites, or a Signer that signs invites)")
	}
	iat := time.Unix(now.Unix(), 0)
	out := make([]Invite, 0, o.Count)
	for range o.Count {
		var id [16]byte
		_, _ = rand.Read(id[:]) // crypto/rand.Read never fails (Go 1.24)
		inv := Invite{ID: base64.RawURLEncoding.EncodeToString(id[:]), Room: room, Lane: o.Lane, User: o.User,
			SingleUse: !o.Reusable, IssuedAt: iat, ExpiresAt: exp}
		c := flashgate.InviteClaims{Iss: iss, Aud: flashgate.InviteAudience, Sub: o.User, Product: room, Lane: o.Lane,
			Jti: inv.ID, Once: !o.Reusable, Iat: iat.Unix(), Exp: exp.Unix()}
		var err error
		if inv.Token, err = k.SignInvite(c.JSON()); err != nil {
			return nil, &flashgate.Error{Code: flashgate.CodeInternal, Message: "sign invite", Err: err}
		}
		out = append(out, inv)
	}
	return out, nil
}

// inviteKeys returns Config.Invites, else the Signer when it signs invites too.
func (is *core) inviteKeys() InviteKeys {
	if is.cfg.Invites != nil {
		return is.cfg.Invites
	}
	k, _ := is.cfg.Signer.(InviteKeys)
	return k
}

// Invites signs invites to room (NewInvites with Config.Issuer and the
// issuer's clock). The room need not exist yet. Errors as NewInvites.
func (is *Admin) Invites(room string, o InviteOptions) ([]Invite, error) {
	now := time.Now()
	if is.cfg.Now != nil {
		now = is.cfg.Now()
	}
	return NewInvites(is.inviteKeys(), is.cfg.Issuer, room, o, now)
}

var b64 = base64.RawURLEncoding.Strict()

// checkInvite verifies tok as an invite to room for user and returns its
// claims: the JWS form, header exactly alg EdDSA + kid + typ
// flashgate-invite+jwt, a key the ring publishes, the Ed25519 signature
// (checked before the claims are read), then iss (Config.Issuer), aud
// (flashgate.InviteAudience), lane, id, and the scope: product = room and,
// when bound, sub = user. The expiry is the script's to judge (the room's
// clock). Errors: flashgate.ErrInviteInvalid (anything but the scope; an
// admission token or a waiting token is invalid here), flashgate.ErrInviteScope.
func (is *Queue) checkInvite(ctx context.Context, room, user, tok string) (flashgate.InviteClaims, error) {
	var c flashgate.InviteClaims
	bad := func(why string) (flashgate.InviteClaims, error) {
		return flashgate.InviteClaims{}, flashgate.Errorf(flashgate.CodeInviteInvalid, "invalid invite: %s", why)
	}
	k := is.inviteKeys()
	if k == nil {
		return bad("this issuer has no keys to verify invites with")
	}
	_, pb, why := openJWS(ctx, tok, MaxInviteLen, flashgate.InviteType, k)
	if why != "" {
		return bad(why)
	}
	if strictJSON(pb, &c) != nil {
		return bad("malformed claims")
	}
	switch {
	case c.Iss != is.cfg.Issuer:
		return bad("from another issuer")
	case c.Aud != flashgate.InviteAudience:
		return bad("for another audience")
	case c.Lane != flashgate.LanePriority && c.Lane != flashgate.LaneBypass:
		return bad("unknown lane")
	case c.Jti == "" || len(c.Jti) > MaxIDLen || c.Exp <= 0:
		return bad("claims invalid")
	case c.Product != room:
		return flashgate.InviteClaims{}, flashgate.Errorf(flashgate.CodeInviteScope, "the invite is for another waiting room")
	case c.Sub != "" && c.Sub != user:
		return flashgate.InviteClaims{}, flashgate.Errorf(flashgate.CodeInviteScope, "the invite is for another user")
	}
	return c, nil
}

// strictJSON decodes one JSON object into v, refusing unknown members and trailing data.
func strictJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return flashgate.ErrInviteInvalid
	}
	return nil
}

// EnterWithInvite enters user in room with an invite (docs/rooms.md "Priority
// lanes and invites"): checkInvite, then one atomic script (lua/invite.lua)
// that refuses an expired invite (by the room's clock) and a single-use one
// already used, and otherwise
//   - for a priority invite, puts the user at the tail of the room's
//     priority lane (Entry.Lane "priority"), admitted before the public line;
//   - for a bypass invite, admits the user at once (ACTIVE) when the room is
//     open and capacity and rate allow, else as a priority invite.
//
// A user waiting in the public line moves to the lane with a new arrival
// number and waiting token (the old one reads NOT_FOUND). A user already in
// the priority lane, or holding a live admission, gets that entry back and
// the invite is not used: a repeated call with the same invite answers the
// same entry. Invite enters are not batched (one script call each); the
// public Enter's batches are unchanged.
//
// An unknown room is created as Enter creates one (Config.DefaultRoom, an
// auto room's slot first when they are limited).
//
// Errors: those of Enter, plus flashgate.ErrInviteInvalid,
// flashgate.ErrInviteScope, flashgate.ErrInviteExpired, flashgate.ErrInviteUsed.
func (is *Queue) EnterWithInvite(ctx context.Context, room, user, invite string) (*Entry, error) {
	if err := checkRoom(room); err != nil {
		return nil, err
	}
	if err := checkUser(user); err != nil {
		return nil, err
	}
	if err := is.needSecret(); err != nil {
		return nil, err
	}
	c, err := is.checkInvite(ctx, room, user, invite)
	if err != nil {
		return nil, err
	}
	once := ""
	if c.Once {
		once = c.Jti
	}
	args := store.InviteArgs{User: user, Lane: c.Lane, Once: once, ExpiresMs: c.Exp * 1000}
	policy := is.createArg(createsByEnter, room)
	r, err := is.db.Invite(ctx, room, policy, args)
	if again, rerr := is.autoRoomAgain(ctx, room, policy, err); rerr != nil { // an auto room, as enterUsers creates one
		return nil, rerr
	} else if again {
		r, err = is.db.Invite(ctx, room, is.defaultPolicy(), args)
	}
	if err != nil {
		return nil, err
	}
	return is.entered(ctx, room, user, enterEntries(r)[0])
}
