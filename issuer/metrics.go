package issuer

import (
	"context"
	"time"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer/store"
)

// ScriptNames returns the names ScriptName answers, sorted.
func ScriptNames() []string { return store.ScriptNames() }

// ScriptName names the flashgate script whose SHA-1 (lowercase hex, as
// EVALSHA sends it) is sha: the name of its lua/ file without ".lua" (enter,
// status, tick, …), or "" for a script that is not flashgate's. The set of
// names is fixed (one per file), so it bounds a metric label.
func ScriptName(sha string) string { return store.ScriptName(sha) }

// ClaimExporter takes or renews, for replica (an id unique to the calling
// process), the lease of exporting room's figures to Prometheus: true when
// replica holds it now (it was free, expired, or already replica's; renewed
// for lease), false while another replica's lease runs. One key,
// fg:{room}:exporter (the room's hash slot), expiring by itself. The
// server's /metrics exports room-wide series (read from Redis, the same on
// every replica) only for the rooms whose lease it holds, so that sum()
// across replicas counts each room once (docs/operations.md#observability).
// Errors: flashgate.ErrInvalidInput (room id), flashgate.ErrUnavailable.
func (is *Metrics) ClaimExporter(ctx context.Context, room, replica string, lease time.Duration) (bool, error) {
	if err := checkRoom(room); err != nil {
		return false, err
	}
	if lease < time.Millisecond {
		return false, flashgate.Errorf(flashgate.CodeInvalidInput, "exporter lease must be at least 1ms, got %s", lease)
	}
	return is.db.Exporter(ctx, room, replica, lease.Milliseconds())
}

// TickObserver is told of every tick Run performs: the room, how long the
// step took (all its script calls), its result and its error (nil, or what
// Tick returned; a room found gone, flashgate.ErrUnknownRoom, included).
// It runs on Run's goroutine: it must be quick and must not block.
type TickObserver func(room string, took time.Duration, res TickResult, err error)

// ObserveTicks makes f the TickObserver of Run (nil: none). Safe to call
// while Run runs; the server's metrics set it (tick duration and failures).
func (is *Metrics) ObserveTicks(f TickObserver) {
	if f == nil {
		is.tickObs.Store(nil)
		return
	}
	is.tickObs.Store(&f)
}

// observeTick reports one tick to the TickObserver, if any.
func (is *Ticker) observeTick(room string, took time.Duration, res TickResult, err error) {
	if f := is.tickObs.Load(); f != nil {
		(*f)(room, took, res, err)
	}
}

// Stats is a consistent snapshot of one room. Its JSON form is the
// server's (server.Stats, GET /admin/rooms/{room}/stats).
type Stats struct {
	Room string
	// Config is the room's config as configured, without the page's
	// branding (PageTitle, PageMessage, BrandColor: read them with Room).
	Config RoomConfig
	// State is the state in effect at At: Config.State with the event window
	// applied (paused before Opens, closed from Closes).
	State RoomState
	// Waiting counts the waiting entries of both lanes.
	Waiting int64
	Active  int64
	// Entered counts entries ever created in the room (the arrival counter):
	// refreshes and repeated enters do not count.
	Entered   int64
	Admitted  int64
	FastTrack int64
	Expired   int64
	// NotClaimed counts the expired admissions that ended early, not claimed
	// within the arrival window (part of Expired).
	NotClaimed int64
	Completed  int64
	Revoked    int64
	Left       int64
	Zombies    int64
	// Banned counts bans set (Ban, and revocations with a ban); Removed the
	// waiting entries bans removed from the line.
	Banned  int64
	Removed int64
	// ClosedOut counts the waiting entries a closed line's drain removed
	// (docs/rooms.md#the-end-of-a-sale): entries that ended CLOSED.
	ClosedOut int64
	// ClosedSeq is the arrival counter when the room last closed: entries
	// up to it belong to a line that closing ended (0: never closed).
	ClosedSeq int64
	// Priority is how many of Waiting wait in the priority lane.
	Priority int64
	// PriorityAdmitted counts admissions from the priority lane (part of
	// Admitted); Bypassed the bypass invites admitted at once (part of
	// Admitted, not of FastTrack); InvitesUsed the invites that took a place
	// (a lane entry or a bypass admission; a repeated enter with the same
	// invite does not count).
	PriorityAdmitted, Bypassed, InvitesUsed int64
	// PeakActive is the highest number of live admissions seen right after an admission.
	PeakActive int64
	// Lottery is the room's pre-queue lottery: nil for a room that has
	// none (fifo, and never drawn); before the draw only its Commitment.
	Lottery *Lottery
	// Epoch is the room's epoch: created with the room, new whenever the room
	// is recreated after Redis lost its data (invariant 6, docs/concepts.md#invariants).
	Epoch string
	At    time.Time
}

// Stats returns room's counters. Errors: flashgate.ErrInvalidInput, flashgate.ErrUnknownRoom, flashgate.ErrUnavailable.
func (is *Metrics) Stats(ctx context.Context, room string) (*Stats, error) {
	if err := checkRoom(room); err != nil {
		return nil, err
	}
	r, err := is.db.Stats(ctx, room)
	if err != nil {
		return nil, err
	}
	st := statsOf(room, r)
	is.rememberPolicy(room, st.Config)
	is.statsLottery(ctx, room, st) // lottery_reveal.go: a derived secret's commitment
	return st, nil
}

// BatchStats are the script calls of one kind an Issuer has sent since New
// and the items (users, tokens, admissions) they carried; Items/Calls is
// the mean batch. Calls that bypass coalescing (ScriptBatch 1) count as
// batches of one.
type BatchStats struct {
	Calls, Items int64
}

// ScriptBatchStats are BatchStats per coalesced operation: Enter (enter
// script), Status (exact Status answers) and Exchange (claims) — both of the
// status script, whose one call may carry both: such a call counts once in
// each — and Complete (complete script).
type ScriptBatchStats struct {
	Enter, Status, Exchange, Complete BatchStats
}

// Observation is one reading of this Issuer's own counters, each counting
// from New (a replica's, not the room-wide figures of Stats): what the
// server's /metrics exports (docs/operations.md#observability).
type Observation struct {
	// Batches counts the coalesced script calls and the items they carried,
	// per operation: Items/Calls is the mean batch of each.
	Batches ScriptBatchStats
	// TickCalls counts the room ticks Run has run (one Tick each, however
	// many script calls it took).
	TickCalls int64
	// RoomsRestored counts the rooms this Issuer recreated from their last
	// known config after Redis lost them (recovery.go).
	RoomsRestored int64
	// MintedNotesLost counts the minted notes (CompleteMinted) that did not
	// reach Redis: the completions of those tokens check their signatures
	// instead.
	MintedNotesLost int64
}

// Observe returns the Issuer's counters in one Observation: one atomic
// load per counter, no Redis call, no error; cheap enough for every scrape.
func (is *Metrics) Observe() Observation {
	get := func(k *batchKind) BatchStats { return BatchStats{Calls: k.calls.Load(), Items: k.items.Load()} }
	return Observation{
		Batches: ScriptBatchStats{Enter: get(&is.batchStats.enter), Status: get(&is.batchStats.status),
			Exchange: get(&is.batchStats.exchange), Complete: get(&is.batchStats.complete)},
		TickCalls:       is.ticks.Load(),
		RoomsRestored:   is.restored.Load(),
		MintedNotesLost: is.mintedLost.Load(),
	}
}
