package store

import "context"

// Stats is lua/stats.lua's reply: {'OK', waiting (public line), live,
// configured state, capacity, rate, session_ms, batch, tick_ms, stats
// HGETALL flat list, now_ms, entries ever created, state in effect,
// opens_ms, closes_ms, epoch, arrival_ms, prequeue, then the lottery:
// cutoff (−1: not drawn), bits, lottery_ms, lottery_done_ms, seed (” before
// the draw), commitment (” without a seed), then the end: closed_seq,
// close_reason, ended_ms, deleted_ms, auto, retention_ms, then priority
// (waiting in the priority lane)}.
type Stats struct {
	Waiting, Live            int64
	Configured               string
	Capacity, Rate           int64
	SessionMs, Batch, TickMs int64
	Counters                 map[string]int64 // the room's stats hash (integer fields)
	NowMs, Entered           int64
	State                    string
	OpensMs, ClosesMs        int64
	Epoch                    string
	ArrivalMs                int64
	PreQueue                 string
	Cutoff, Bits             int64
	LotteryMs, LotteryDoneMs int64
	Seed, Commitment         string
	ClosedSeq                int64
	CloseReason              string
	EndedMs, DeletedMs       int64
	Auto                     bool
	RetentionMs              int64
	Priority                 int64
}

// Stats runs lua/stats.lua: a consistent snapshot of room's counters and
// config. KEYS: the room's; ARGV: now, "".
func (g *Gateway) Stats(ctx context.Context, room string) (Stats, error) {
	r, err := g.run(ctx, statsScript, room, roomKeysOf{room}.keys(), "")
	if err != nil {
		return Stats{}, err
	}
	return decodeStats(r)
}

func decodeStats(r []any) (Stats, error) {
	c := newReader("stats", r)
	c.expect("tag", "OK")
	v := Stats{Waiting: c.int("waiting"), Live: c.int("live"), Configured: c.str("configured"),
		Capacity: c.int("capacity"), Rate: c.int("rate"), SessionMs: c.int("session_ms"), Batch: c.int("batch"),
		TickMs: c.int("tick_ms")}
	kv := c.list("stats")
	v.Counters = make(map[string]int64, kv.len()/2)
	for kv.more() {
		name := kv.str("name")
		v.Counters[name] = kv.int(name)
	}
	v.NowMs, v.Entered, v.State = c.int("now_ms"), c.int("entered"), c.str("state")
	v.OpensMs, v.ClosesMs, v.Epoch = c.int("opens_ms"), c.int("closes_ms"), c.str("epoch")
	v.ArrivalMs, v.PreQueue = c.int("arrival_ms"), c.str("prequeue")
	v.Cutoff, v.Bits, v.LotteryMs, v.LotteryDoneMs = c.int("cutoff"), c.int("bits"), c.int("lottery_ms"), c.int("lottery_done_ms")
	v.Seed, v.Commitment = c.str("seed"), c.str("commitment")
	v.ClosedSeq, v.CloseReason = c.int("closed_seq"), c.str("close_reason")
	v.EndedMs, v.DeletedMs, v.Auto = c.int("ended_ms"), c.int("deleted_ms"), c.str("auto") == "1"
	v.RetentionMs, v.Priority = c.int("retention_ms"), c.int("priority")
	if c.Err() != nil {
		return Stats{}, c.Err()
	}
	return v, nil
}
