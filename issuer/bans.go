package issuer

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/flashgate/flashgate"
)

// Bounds of a ban (docs/rooms.md#bans).
const (
	// MaxBan is the longest ban: 30 days. Longer is an account matter for
	// the platform's gateway, not the queue's.
	MaxBan = 30 * 24 * time.Hour
	// MaxBanReason bounds a ban's reason (bytes of UTF-8, no control characters).
	MaxBanReason = 200
	// MaxBansPage is the most bans one Bans call lists.
	MaxBansPage = 1000
)

// Ban is a user's ban from a room: Enter refuses them with
// flashgate.ErrBanned (a *BannedError) until Until.
type Ban struct {
	User     string
	Until    time.Time // millisecond precision, by the room's clock
	BannedAt time.Time // when the ban was (last) set
	Reason   string
	// RemovedWaiting and RevokedAdmission report what the ban ended (Ban's
	// answer only): the user's waiting entry, whose token now reads
	// REVOKED, and the admission id of the live admission it revoked.
	RemovedWaiting   bool
	RevokedAdmission string
}

// BannedError is Enter's answer to a banned user: a flashgate.ErrBanned
// (errors.Is matches it) that carries the ban's end, for callers that show
// it (the server's banned_until_ms and Retry-After).
type BannedError struct {
	Err   *flashgate.Error // Code is flashgate.CodeBanned
	Until time.Time
}

func (e *BannedError) Error() string { return e.Err.Error() }

// Unwrap returns the domain error.
func (e *BannedError) Unwrap() error { return e.Err }

func bannedError(room string, until int64) error {
	t := time.UnixMilli(until)
	return &BannedError{Until: t, Err: flashgate.Errorf(flashgate.CodeBanned,
		"banned from waiting room %q until %s", room, t.UTC().Format(time.RFC3339))}
}

func checkBan(d time.Duration, reason string) error {
	if d < time.Millisecond || d > MaxBan {
		return flashgate.Errorf(flashgate.CodeInvalidInput, "a ban lasts 1 ms … %s (30 days), not %s", MaxBan, d)
	}
	if len(reason) > MaxBanReason {
		return flashgate.Errorf(flashgate.CodeInvalidInput, "a ban's reason is at most %d bytes", MaxBanReason)
	}
	for _, r := range reason {
		if r < 0x20 || r == 0x7f || r == '\uFFFD' {
			return flashgate.Errorf(flashgate.CodeInvalidInput, "a ban's reason is UTF-8 text without control characters")
		}
	}
	return nil
}

// Ban bans user from room for d (1 ms … MaxBan) in one atomic step: their
// waiting entry is removed (its waiting token then reads REVOKED, status and
// event streams end), their live admission is revoked (its completion is
// refused), and their enters are refused with flashgate.ErrBanned until
// now + d by the room's clock. A user who is not in the room may be banned
// ahead. Banning again replaces the end and the reason. reason is optional
// (at most MaxBanReason bytes) and shown by Bans.
//
// Errors: flashgate.ErrInvalidInput (ids, duration, reason),
// flashgate.ErrUnknownRoom, flashgate.ErrUnavailable, flashgate.ErrStoreFull.
func (is *Admin) Ban(ctx context.Context, room, user string, d time.Duration, reason string) (*Ban, error) {
	if err := checkRoom(room); err != nil {
		return nil, err
	}
	if err := checkUser(user); err != nil {
		return nil, err
	}
	if err := checkBan(d, reason); err != nil {
		return nil, err
	}
	v, err := is.db.Ban(ctx, room, user, d.Milliseconds(), reason)
	if err != nil {
		return nil, err
	}
	return &Ban{User: user, Until: time.UnixMilli(v.UntilMs), RemovedWaiting: v.RemovedWaiting,
		RevokedAdmission: v.RevokedAdmission, BannedAt: time.UnixMilli(v.AtMs), Reason: reason}, nil
}

// Unban lifts user's ban from room; they may enter again (to the back of the
// line). Errors: flashgate.ErrInvalidInput, flashgate.ErrUnknownRoom,
// flashgate.ErrNotFound (no ban in effect), flashgate.ErrUnavailable.
func (is *Admin) Unban(ctx context.Context, room, user string) error {
	if err := checkRoom(room); err != nil {
		return err
	}
	if err := checkUser(user); err != nil {
		return err
	}
	lifted, err := is.db.Unban(ctx, room, user)
	if err != nil {
		return err
	}
	if !lifted {
		return flashgate.Errorf(flashgate.CodeNotFound, "user %q has no ban in effect in room %q", user, room)
	}
	return nil
}

// BanPage is one page of a room's bans in effect, earliest end first.
type BanPage struct {
	Bans []Ban
	// Total is the number of bans in effect in the room.
	Total int64
	// Next is the cursor of the next page, "" after the last one.
	Next string
}

// Bans lists room's bans in effect, earliest end first: limit of them (1 …
// MaxBansPage) after cursor ("" for the first page; BanPage.Next of the
// previous one). Errors: flashgate.ErrInvalidInput (limit, cursor),
// flashgate.ErrUnknownRoom, flashgate.ErrUnavailable.
func (is *Admin) Bans(ctx context.Context, room, cursor string, limit int) (*BanPage, error) {
	if err := checkRoom(room); err != nil {
		return nil, err
	}
	if limit < 1 || limit > MaxBansPage {
		return nil, flashgate.Errorf(flashgate.CodeInvalidInput, "limit is 1 … %d", MaxBansPage)
	}
	var cu, cuser string
	if cursor != "" {
		var ok bool
		cu, cuser, ok = strings.Cut(cursor, ".")
		if n, err := strconv.ParseInt(cu, 10, 64); !ok || err != nil || n <= 0 || checkUser(cuser) != nil {
			return nil, flashgate.Errorf(flashgate.CodeInvalidInput, "malformed cursor %q", clip(cursor))
		}
	}
	r, err := is.db.Bans(ctx, room, cu, cuser, limit)
	if err != nil {
		return nil, err
	}
	p := &BanPage{Total: r.Total}
	for _, b := range r.Bans {
		ban := Ban{User: b.User, Until: time.UnixMilli(b.UntilMs), Reason: b.Reason}
		if b.Dated {
			ban.BannedAt = time.UnixMilli(b.BannedMs)
		}
		p.Bans = append(p.Bans, ban)
	}
	if len(p.Bans) == limit {
		last := p.Bans[len(p.Bans)-1]
		p.Next = strconv.FormatInt(last.Until.UnixMilli(), 10) + "." + last.User
	}
	return p, nil
}
