package store

import (
	"context"

	"github.com/flashgate/flashgate/internal/roomkey"
)

// AutoRoom runs lua/autoroom.lua (no prelude): reserves room's slot among
// the auto rooms, at most max of them. KEYS: fg:autorooms; ARGV: room, now
// (ms), max. True when room holds a slot.
func (g *Gateway) AutoRoom(ctx context.Context, room string, nowMs int64, max int) (bool, error) {
	n, err := g.runInt(ctx, autoRoomScript, "autoroom", "held", []string{roomkey.AutoRooms}, room, nowMs, max)
	return n == 1, err
}
