package store

import (
	"context"
	"fmt"

	"github.com/flashgate/flashgate/internal/roomkey"
)

// CompleteItem is one admission of a complete call: the token's sub and
// jti, and its minted digest when its signature was not checked ("" when
// it was).
type CompleteItem struct{ User, JTI, Digest string }

// Completed is one admission's outcome in lua/complete.lua's reply:
// {'COMPLETED', at_ms, repeated}, or {'ERROR', code}: Err, that
// admission's own refusal (ScriptError).
type Completed struct {
	AtMs     int64 // when the admission was completed (the first time)
	Repeated bool
	Err      error
}

// Complete runs lua/complete.lua for items, in order (one call, replicated:
// WAIT under Options.Replicas). KEYS: completeKeysOf (the room keys it
// binds, then each admission's minted note); ARGV: now, "", then user,
// jti, digest per admission. Errors of the whole call: the script's, and
// Unavailable.
func (g *Gateway) Complete(ctx context.Context, room string, items []CompleteItem) ([]Completed, error) {
	k := completeKeysOf{room: room, minted: make([]string, len(items))}
	args := make([]any, 0, 3*len(items))
	for i, it := range items {
		args = append(args, it.User, it.JTI, it.Digest)
		k.minted[i] = roomkey.Minted(room, it.JTI)
	}
	r, err := g.runReplicated(ctx, completeScript, room, k.keys(), args...)
	if err != nil {
		return nil, err
	}
	return decodeComplete(r, len(items), room)
}

func decodeComplete(r []any, n int, room string) ([]Completed, error) {
	c := newReader("complete", r)
	if len(r) != n {
		c.bad("admissions", fmt.Sprintf("%d admissions answered, %d sent", len(r), n))
		return nil, c.Err()
	}
	out := make([]Completed, n)
	for i := range out {
		a := c.list(fmt.Sprintf("admission[%d]", i+1))
		switch tag := a.str("tag"); tag {
		case "COMPLETED":
			out[i].AtMs, out[i].Repeated = a.int("at_ms"), a.flag("repeated")
		case "ERROR":
			out[i].Err = ScriptError(a.str("code"), room)
		default:
			a.bad("tag", fmt.Sprintf("unknown tag %q", tag))
		}
		if a.more() {
			a.bad("end", "trailing fields")
		}
	}
	if c.Err() != nil {
		return nil, c.Err()
	}
	return out, nil
}
