package store

import "context"

// Audit runs lua/audit.lua: journals an operator's action on room (actor,
// action, detail: a JSON object or ""). KEYS: the room's; ARGV: now, "",
// actor, action, detail. Reply {written}: true when the room journals.
func (g *Gateway) Audit(ctx context.Context, room, actor, action, detail string) (bool, error) {
	r, err := g.run(ctx, auditScript, room, roomKeysOf{room}.keys(), "", actor, action, detail)
	if err != nil {
		return false, err
	}
	return decodeAudit(r)
}

func decodeAudit(r []any) (bool, error) {
	c := newReader("audit", r)
	written := c.int("written") == 1
	return written, c.Err()
}
