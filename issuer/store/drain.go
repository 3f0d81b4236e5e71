package store

import "context"

// Drain is lua/drain.lua's reply: {removed, left}.
type Drain struct{ Removed, Left int }

// Drain runs lua/drain.lua: removes up to max entries of room's closed
// line. KEYS: the room's; ARGV: now, "", max, default retention (ms).
func (g *Gateway) Drain(ctx context.Context, room string, max int, retentionMs int64) (Drain, error) {
	r, err := g.run(ctx, drainScript, room, roomKeysOf{room}.keys(), "", max, retentionMs)
	if err != nil {
		return Drain{}, err
	}
	return decodeDrain(r)
}

func decodeDrain(r []any) (Drain, error) {
	c := newReader("drain", r)
	v := Drain{Removed: int(c.int("removed")), Left: int(c.int("left"))}
	return v, c.Err()
}
