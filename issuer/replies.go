package issuer

import (
	"time"

	"github.com/flashgate/flashgate/issuer/store"
)

// The gateway's typed replies (issuer/store: one call per script, each
// reply read by its one checked reader) as the issuer's own values. Named
// fields to named fields: no reply is read by position here.

// completeReply is one admission's completion (the complete script).
type completeReply struct {
	at       time.Time // when the admission was completed (the first time)
	repeated bool
}

// completions returns the outcomes of a complete reply, one per admission.
func completions(r []store.Completed) []outcome[completeReply] {
	out := make([]outcome[completeReply], len(r))
	for i, c := range r {
		if c.Err != nil {
			out[i].err = c.Err
			continue
		}
		out[i].res = completeReply{at: time.UnixMilli(c.AtMs), repeated: c.Repeated}
	}
	return out
}

// tickConfig is the room's config as a tick reports it.
func tickConfig(t store.Tick) RoomConfig {
	c := t.Config
	return RoomConfig{State: RoomState(c.State), Capacity: int(c.Capacity), RatePerMinute: int(c.Rate),
		SessionDuration: time.Duration(c.SessionMs) * time.Millisecond, TickBatch: int(c.Batch),
		Tick: time.Duration(t.TickMs) * time.Millisecond, Opens: windowTime(c.OpensMs), Closes: windowTime(c.ClosesMs),
		ArrivalWindow: arrivalWindow(c.ArrivalMs), PreQueue: preQueueOf(c.PreQueue),
		EndedAt: windowTime(c.EndedMs), DeletedAt: windowTime(c.DeletedMs), Auto: c.Auto,
		CloseReason: c.CloseReason, Retention: time.Duration(c.RetentionMs) * time.Millisecond}
}

// statsOf returns room's Stats from a stats reply: Waiting counts both
// lanes, Priority the priority lane.
func statsOf(room string, r store.Stats) *Stats {
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	st := &Stats{Room: room, Waiting: r.Waiting + r.Priority, Active: r.Live,
		Config: RoomConfig{State: RoomState(r.Configured), Capacity: int(r.Capacity), RatePerMinute: int(r.Rate),
			SessionDuration: ms(r.SessionMs), TickBatch: int(r.Batch), Tick: ms(r.TickMs),
			Opens: windowTime(r.OpensMs), Closes: windowTime(r.ClosesMs),
			ArrivalWindow: arrivalWindow(r.ArrivalMs), PreQueue: preQueueOf(r.PreQueue),
			CloseReason: r.CloseReason, EndedAt: windowTime(r.EndedMs), DeletedAt: windowTime(r.DeletedMs),
			Auto: r.Auto, Retention: ms(r.RetentionMs)},
		At: time.UnixMilli(r.NowMs), Entered: r.Entered, State: RoomState(r.State), Epoch: r.Epoch,
		Priority: r.Priority, ClosedSeq: r.ClosedSeq}
	n := r.Counters
	st.Admitted, st.FastTrack, st.Expired, st.NotClaimed = n["admitted"], n["fast_track"], n["expired"], n["not_claimed"]
	st.Completed, st.Revoked, st.Left, st.Zombies = n["completed"], n["revoked"], n["left"], n["zombies"]
	st.PeakActive, st.Banned, st.Removed, st.ClosedOut = n["peak_active"], n["banned"], n["removed"], n["closed_out"]
	st.PriorityAdmitted, st.Bypassed, st.InvitesUsed = n["priority_admitted"], n["bypassed"], n["invites_used"]
	if r.Cutoff >= 0 || r.Commitment != "" {
		l := &Lottery{Commitment: r.Commitment, Placed: n["drawn"]}
		if r.Cutoff >= 0 {
			l.Drawn, l.Cutoff, l.Bits, l.Seed = true, r.Cutoff, int(r.Bits), r.Seed
			l.DrawnAt, l.PlacedAt = windowTime(r.LotteryMs), windowTime(r.LotteryDoneMs)
		}
		st.Lottery = l
	}
	return st
}

// snapshotOf returns the snapshot of a snapshot reply; at is when the call
// was sent.
func snapshotOf(r store.Snapshot, at time.Time) *snapshot {
	s := &snapshot{at: at, waiting: r.Waiting, head: r.Head, tail: r.Tail, state: RoomState(r.State), rate: r.Rate,
		capacity: r.Capacity, tick: time.Duration(r.TickMs) * time.Millisecond, epoch: r.Epoch,
		exactThrough: r.ExactThrough, before: r.Before, closedSeq: r.ClosedSeq, closeReason: r.CloseReason,
		ended: r.EndedMs, priority: r.Priority, laneMin: r.LaneMin, laneMax: r.LaneMax}
	if len(r.Banned) > 0 {
		s.banned = make(map[string]struct{}, len(r.Banned))
		for _, u := range r.Banned {
			s.banned[u] = struct{}{}
		}
	}
	if len(r.LaneSeqs) > 0 {
		s.laneSeqs = make(map[int64]struct{}, len(r.LaneSeqs))
		for _, q := range r.LaneSeqs {
			s.laneSeqs[q] = struct{}{}
		}
	}
	s.eta, s.hasETA = figuresOf(r.ETA, r.Rate)
	s.eta.sample = make([]rankedExpiry, 0, len(r.Sample))
	for _, x := range r.Sample {
		s.eta.sample = append(s.eta.sample, rankedExpiry{j: x.J, at: x.AtMs})
	}
	return s
}
