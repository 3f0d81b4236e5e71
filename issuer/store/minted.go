package store

import (
	"context"

	"github.com/flashgate/flashgate/internal/roomkey"
)

// MintedNote is one admission token's note: its admission id, digest and
// time to live (ms, > 0).
type MintedNote struct {
	JTI, Digest string
	TTLms       int64
}

// Minted runs lua/minted.lua (no prelude): writes room's notes. KEYS: the
// minted key of each note (roomkey.Minted); ARGV: digest, ttl per note.
func (g *Gateway) Minted(ctx context.Context, room string, notes []MintedNote) error {
	keys := make([]string, len(notes))
	args := make([]any, 0, 2*len(notes))
	for i, n := range notes {
		keys[i] = roomkey.Minted(room, n.JTI)
		args = append(args, n.Digest, n.TTLms)
	}
	if err := mintedScript.Run(ctx, g.rdb, keys, args...).Err(); err != nil {
		return Unavailable(err)
	}
	return nil
}
