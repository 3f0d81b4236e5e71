package store

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/roomkey"
)

// Stop runs lua/stop.lua (no prelude): moves room's not_before to the
// second after now by the room's clock, never backwards, and returns it
// (Unix s). KEYS: the room's config hash; ARGV: now. Errors: unknown_room
// (ScriptError), Unavailable.
func (g *Gateway) Stop(ctx context.Context, room string) (int64, error) {
	nb, err := g.runInt(ctx, stopScript, "stop", "not_before", configKeyOf{roomkey.Key(room, roomkey.Config)}.keys(), g.nowArg())
	if err != nil {
		return 0, err
	}
	if nb == 0 {
		return 0, ScriptError("unknown_room", room)
	}
	return nb, nil
}

// Branding runs lua/branding.lua (no prelude): sets the fields of room's
// config hash given as name, value pairs that are not set yet. Errors:
// Unavailable.
func (g *Gateway) Branding(ctx context.Context, room string, pairs ...string) error {
	args := make([]any, len(pairs))
	for i, p := range pairs {
		args[i] = p
	}
	err := brandingScript.Run(ctx, g.rdb, configKeyOf{roomkey.Key(room, roomkey.Config)}.keys(), args...).Err()
	if err != nil && !errors.Is(err, redis.Nil) {
		return Unavailable(err)
	}
	return nil
}
