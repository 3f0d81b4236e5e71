package store

import (
	"context"
	"strconv"
	"strings"
)

// Bans is lua/bans.lua's reply: {total, then per ban user,
// banned_until_ms, "<banned_ms>:<reason>"}.
type Bans struct {
	Total int64
	Bans  []BanEntry
}

// BanEntry is one ban of a Bans page.
type BanEntry struct {
	User              string
	UntilMs, BannedMs int64
	Dated             bool // BannedMs was recorded
	Reason            string
}

// Bans runs lua/bans.lua: a page of at most limit of room's bans after the
// cursor (end ms and user; "", "" for the first page). KEYS: the room's;
// ARGV: now, "", cursor end, cursor user, limit.
func (g *Gateway) Bans(ctx context.Context, room, cursorMs, cursorUser string, limit int) (Bans, error) {
	r, err := g.run(ctx, bansScript, room, roomKeysOf{room}.keys(), "", cursorMs, cursorUser, limit)
	if err != nil {
		return Bans{}, err
	}
	return decodeBans(r)
}

func decodeBans(r []any) (Bans, error) {
	c := newReader("bans", r)
	v := Bans{Total: c.int("total")}
	for c.more() {
		b := BanEntry{User: c.str("user"), UntilMs: c.int("banned_until_ms")}
		at, reason, _ := strings.Cut(c.str("why"), ":")
		if ms, err := strconv.ParseInt(at, 10, 64); err == nil {
			b.BannedMs, b.Dated = ms, true
		}
		b.Reason = reason
		v.Bans = append(v.Bans, b)
	}
	return v, c.Err()
}
