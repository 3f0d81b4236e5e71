package store

import "context"

// Leave runs lua/leave.lua: removes user's waiting entry (arrival seq of
// epoch) or ends its live admission. KEYS: the room's; ARGV: now, "", user,
// seq, epoch. Reply {'LEFT'} or {'NOT_FOUND'}: true when left.
func (g *Gateway) Leave(ctx context.Context, room, user string, seq int64, epoch string) (bool, error) {
	r, err := g.run(ctx, leaveScript, room, roomKeysOf{room}.keys(), "", user, seq, epoch)
	if err != nil {
		return false, err
	}
	return decodeLeave(r)
}

func decodeLeave(r []any) (bool, error) {
	c := newReader("leave", r)
	left := c.str("verdict") == "LEFT"
	return left, c.Err()
}
