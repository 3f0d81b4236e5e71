package store

import "context"

// Configure is lua/configure.lua's reply: {state in effect, ended_ms,
// close_reason, deleted_ms, waiting}.
type Configure struct {
	State       string
	EndedMs     int64
	CloseReason string
	DeletedMs   int64
	Waiting     int64
}

// ConfigureArgs are lua/configure.lua's arguments: a fresh lottery seed or
// "", the close reason or "", the default retention (ms), Delete, and the
// config's field, value pairs.
type ConfigureArgs struct {
	Seed, Reason string
	RetentionMs  int64
	Delete       bool
	Fields       []any // name, value, name, value…
}

// Configure runs lua/configure.lua: writes room's config (creating the
// room), or deletes it. KEYS: the room's; ARGV: now, "", seed, reason,
// retention, '1' to delete, then the field pairs.
func (g *Gateway) Configure(ctx context.Context, room string, a ConfigureArgs) (Configure, error) {
	deleted := ""
	if a.Delete {
		deleted = "1"
	}
	args := append([]any{a.Seed, a.Reason, a.RetentionMs, deleted}, a.Fields...)
	r, err := g.run(ctx, configureScript, room, roomKeysOf{room}.keys(), "", args...)
	if err != nil {
		return Configure{}, err
	}
	return decodeConfigure(r)
}

func decodeConfigure(r []any) (Configure, error) {
	c := newReader("configure", r)
	v := Configure{State: c.str("state"), EndedMs: c.int("ended_ms"), CloseReason: c.str("close_reason"),
		DeletedMs: c.int("deleted_ms"), Waiting: c.int("waiting")}
	return v, c.Err()
}
