package store

import "context"

// Tick is lua/tick.lua's reply: {admitted, expired, active, waiting,
// tick_ms, created, then the room's config as configured: state, capacity,
// rate, session_ms, batch, opens_ms, closes_ms, arrival_ms, then
// not_claimed, drawn, prequeue, then drain, ended_ms, deleted_ms, auto,
// close_reason, retention_ms, closed_out, then priority_admitted}.
type Tick struct {
	Admitted, Expired int   // this call's admissions and expiries
	Active, Waiting   int   // after the call
	TickMs            int64 // the room's tick
	Created           bool  // the call restored the room from the create policy
	Config            TickConfig
	NotClaimed        int // of the expiries, those not claimed within the arrival window
	Placed            int // pre-queue entries this call moved to their lottery place
	Drain             int // waiting entries of a closed line, for drain.lua (0: none)
	ClosedOut         int // entries of a closed line the call dropped from the head
	PriorityAdmitted  int // of the admissions, those from the priority lane
}

// TickConfig is the room's config as a tick reports it (as configured).
type TickConfig struct {
	State                        string
	Capacity, Rate               int64
	SessionMs, Batch             int64
	OpensMs, ClosesMs, ArrivalMs int64
	PreQueue                     string
	EndedMs, DeletedMs           int64
	Auto                         bool
	CloseReason                  string
	RetentionMs                  int64
}

// TickArgs are lua/tick.lua's bounds: the most admissions and expiries of
// the call (Max), those the step already made (Admitted, Expired), the
// default retention and the idle time after which an auto room is deleted
// (ms, 0: never).
type TickArgs struct {
	Max, Admitted, Expired  int
	RetentionMs, AutoIdleMs int64
}

// Tick runs lua/tick.lua: admits, expires and trims room (the admission
// rate and capacity logic: the prelude's rate_budget and admit). policy is
// the create-room argument (restores only). KEYS: the room's; ARGV: now,
// policy, then TickArgs in order.
func (g *Gateway) Tick(ctx context.Context, room, policy string, a TickArgs) (Tick, error) {
	r, err := g.run(ctx, tickScript, room, roomKeysOf{room}.keys(), policy, a.Max, a.Admitted, a.Expired,
		a.RetentionMs, a.AutoIdleMs)
	if err != nil {
		return Tick{}, err
	}
	return decodeTick(r)
}

func decodeTick(r []any) (Tick, error) {
	c := newReader("tick", r)
	v := Tick{Admitted: int(c.int("admitted")), Expired: int(c.int("expired")), Active: int(c.int("active")),
		Waiting: int(c.int("waiting")), TickMs: c.int("tick_ms"), Created: c.flag("created")}
	v.Config = TickConfig{State: c.str("state"), Capacity: c.int("capacity"), Rate: c.int("rate"),
		SessionMs: c.int("session_ms"), Batch: c.int("batch"), OpensMs: c.int("opens_ms"), ClosesMs: c.int("closes_ms"),
		ArrivalMs: c.int("arrival_ms")}
	v.NotClaimed, v.Placed = int(c.int("not_claimed")), int(c.int("drawn"))
	v.Config.PreQueue = c.str("prequeue")
	v.Drain = int(c.int("drain"))
	v.Config.EndedMs, v.Config.DeletedMs = c.int("ended_ms"), c.int("deleted_ms")
	v.Config.Auto = c.str("auto") == "1"
	v.Config.CloseReason, v.Config.RetentionMs = c.str("close_reason"), c.int("retention_ms")
	v.ClosedOut, v.PriorityAdmitted = int(c.int("closed_out")), int(c.int("priority_admitted"))
	if c.Err() != nil {
		return Tick{}, c.Err()
	}
	return v, nil
}
