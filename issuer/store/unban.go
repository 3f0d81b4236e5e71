package store

import "context"

// Unban runs lua/unban.lua: lifts user's ban. KEYS: the room's; ARGV: now,
// "", user. Reply {'UNBANNED', 1 | 0}: true when a ban was lifted.
func (g *Gateway) Unban(ctx context.Context, room, user string) (bool, error) {
	r, err := g.run(ctx, unbanScript, room, roomKeysOf{room}.keys(), "", user)
	if err != nil {
		return false, err
	}
	return decodeUnban(r)
}

func decodeUnban(r []any) (bool, error) {
	c := newReader("unban", r)
	c.expect("tag", "UNBANNED")
	lifted := c.flag("lifted")
	return lifted, c.Err()
}
