package store

import "context"

// Active is lua/active.lua's verdict on one admission:
// {'ACTIVE', expiry_ms}, {'EXPIRED', expiry_ms} or {'GONE'}.
type Active string

const (
	ActiveLive    Active = "ACTIVE"
	ActiveExpired Active = "EXPIRED"
	ActiveGone    Active = "GONE"
)

// Active runs lua/active.lua: is admission jti of room still live by the
// room's clock? KEYS: the room's; ARGV: now, "", jti.
func (g *Gateway) Active(ctx context.Context, room, jti string) (Active, error) {
	r, err := g.run(ctx, activeScript, room, roomKeysOf{room}.keys(), "", jti)
	if err != nil {
		return "", err
	}
	return decodeActive(r)
}

func decodeActive(r []any) (Active, error) {
	c := newReader("active", r)
	v := Active(c.str("verdict"))
	switch v {
	case ActiveLive, ActiveExpired:
		c.int("expiry_ms")
	case ActiveGone:
	default:
		c.bad("verdict", "unknown verdict")
	}
	return v, c.Err()
}
