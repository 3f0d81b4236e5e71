package store

import "context"

// Snapshot is lua/snapshot.lua's reply: {waiting (public line), head_seq,
// tail_seq, room_state, rate, capacity, tick_ms, epoch, banned users,
// exact_through, before, closed_seq, close reason, ended_ms, priority lane
// length, the smallest and largest lane seq, the lane seqs, eta figures,
// sampled expiries {j, expiry_ms, …}}.
type Snapshot struct {
	Waiting, Head, Tail    int64
	State                  string
	Rate, Capacity, TickMs int64
	Epoch                  string
	Banned                 []string // every banned user (none listed past 1,000)
	ExactThrough, Before   int64
	ClosedSeq              int64
	CloseReason            string
	EndedMs                int64
	Priority               int64
	LaneMin, LaneMax       int64
	LaneSeqs               []int64 // (none listed past 1,000)
	ETA                    Figures
	Sample                 []RankedExpiry
}

// RankedExpiry is the J-th earliest live expiry (ms), J 1-based.
type RankedExpiry struct{ J, AtMs int64 }

// Snapshot runs lua/snapshot.lua: the cheap summary a replica keeps per
// room to answer status far back in line. KEYS: the room's; ARGV: now, "".
func (g *Gateway) Snapshot(ctx context.Context, room string) (Snapshot, error) {
	r, err := g.run(ctx, snapshotScript, room, roomKeysOf{room}.keys(), "")
	if err != nil {
		return Snapshot{}, err
	}
	return decodeSnapshot(r)
}

func decodeSnapshot(r []any) (Snapshot, error) {
	c := newReader("snapshot", r)
	v := Snapshot{Waiting: c.int("waiting"), Head: c.int("head_seq"), Tail: c.int("tail_seq"), State: c.str("room_state"),
		Rate: c.int("rate"), Capacity: c.int("capacity"), TickMs: c.int("tick_ms"), Epoch: c.str("epoch")}
	for b := c.list("banned"); b.more(); {
		v.Banned = append(v.Banned, b.str("user"))
	}
	v.ExactThrough, v.Before = c.int("exact_through"), c.int("before")
	v.ClosedSeq, v.CloseReason, v.EndedMs = c.int("closed_seq"), c.str("close_reason"), c.int("ended_ms")
	v.Priority, v.LaneMin, v.LaneMax = c.int("priority"), c.int("lane_min"), c.int("lane_max")
	for l := c.list("lane_seqs"); l.more(); {
		v.LaneSeqs = append(v.LaneSeqs, l.int("seq"))
	}
	v.ETA = c.figures("eta")
	for s := c.list("expiries"); s.more(); {
		v.Sample = append(v.Sample, RankedExpiry{J: s.int("j"), AtMs: s.int("expiry_ms")})
	}
	if c.Err() != nil {
		return Snapshot{}, c.Err()
	}
	return v, nil
}
