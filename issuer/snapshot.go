package issuer

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashgate/flashgate"
)

// maxSnapshotRooms bounds the per-replica snapshot map; past it the map is
// reset (snapshots are a cache).
const maxSnapshotRooms = 10_000

// snapshot is a replica's summary of one room's line: the arrival numbers of
// its first and last waiting entries and its length, fetched with one small
// script (lua/snapshot.lua) at most once per Config.StatusSnapshot.
//
// Status answers a waiting user far enough behind the head from it:
// position is interpolated between head (1) and tail (waiting), exact
// while nobody in between has left, and flagged Entry.PositionEstimated. A
// million waiting clients polling then cost Redis one call per room per
// refresh and replica instead of one each. Users near the head — those a
// few ticks from admission, where state changes — always get the exact
// script; so do users who arrived after the snapshot.
type snapshot struct {
	at         time.Time
	waiting    int64
	head, tail int64
	state      RoomState
	rate       int64
	capacity   int64
	tick       time.Duration
	epoch      string // the room's epoch: a token of another one is answered exactly
	// banned holds the room's banned users (nil when none, or more than the
	// snapshot script lists): they are answered exactly, so that a waiting
	// user removed by a ban reads REVOKED, not an interpolated place.
	banned map[string]struct{}
	// exactThrough: arrival numbers up to it are answered exactly — a
	// shuffle room's pre-queue, whose places the lottery draws, so that
	// their arrival numbers say nothing of them (lua/snapshot.lua). head is
	// then the first waiting arrival after them and before the number of
	// entries (drawn or still in the pre-queue) ahead of it.
	exactThrough, before int64
	// closedSeq, closeReason and ended (ms) are the room's end (lua/snapshot.lua):
	// entries up to closedSeq, and every one while state is closed, read CLOSED.
	closedSeq   int64
	closeReason string
	ended       int64
	// The lanes: the priority lane's length (added to a public entry's
	// interpolated position), and the arrival numbers of entries created
	// through a lane that the public line has not passed yet (laneseqs): the
	// smallest and largest (0 when none) and all of them (nil when more than
	// the snapshot script lists). Those are answered exactly — a lane entry's
	// number falls among the public line's, and it may be waiting in the
	// lane or admitted — and so is every number within laneMin…laneMax
	// while they are not listed.
	priority, laneMin, laneMax int64
	laneSeqs                   map[int64]struct{}
	// eta holds the room's figures for estimates, with a sample of live
	// expiries (etaFigures.sample); hasETA is false for a closed room.
	eta    etaFigures
	hasETA bool
}

type roomSnapshot struct {
	mu   sync.Mutex // held by the one caller refreshing
	snap atomic.Pointer[snapshot]
}

type snapshots struct {
	mu    sync.RWMutex
	rooms map[string]*roomSnapshot
}

// room returns room's entry; a status poll only takes the read lock.
func (s *snapshots) room(room string) *roomSnapshot {
	s.mu.RLock()
	rs := s.rooms[room]
	s.mu.RUnlock()
	if rs != nil {
		return rs
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rooms == nil || len(s.rooms) >= maxSnapshotRooms {
		s.rooms = map[string]*roomSnapshot{}
	}
	if rs = s.rooms[room]; rs == nil {
		rs = &roomSnapshot{}
		s.rooms[strings.Clone(room)] = rs // kept: a copy (invariant 7)
	}
	return rs
}

func (s *snapshots) forget(room string) {
	s.mu.Lock()
	delete(s.rooms, room)
	s.mu.Unlock()
}

// snapshot returns a snapshot of room no older than maxAge, refreshing it
// (one caller at a time; the others wait for its result) when needed, or nil
// when it cannot be had.
func (is *Queue) snapshot(ctx context.Context, room string) *snapshot {
	maxAge := is.cfg.StatusSnapshot
	rs := is.snaps.room(room)
	if s := rs.snap.Load(); s != nil && time.Since(s.at) < maxAge {
		return s
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if s := rs.snap.Load(); s != nil && time.Since(s.at) < maxAge {
		return s
	}
	at := time.Now()
	r, err := is.db.Snapshot(ctx, room)
	if err != nil {
		is.snaps.forget(room)
		return nil
	}
	s := snapshotOf(r, at)
	rs.snap.Store(s)
	return s
}

// nearHead is how many arrivals behind the head still get the exact answer:
// everyone the room could admit while a snapshot ages, twice over (the
// shared bucket bursts up to two ticks' worth), plus two ticks, at least 50.
func (s *snapshot) nearHead(maxAge time.Duration) int64 {
	tick := max(s.tick, 100*time.Millisecond)
	perTick := (s.rate*tick.Milliseconds() + 59_999) / 60_000
	ticks := int64((maxAge+tick-1)/tick) + 2
	return max(50, 2*perTick*ticks)
}

// fromSnapshot answers Status for ref from the room's snapshot, or returns
// nil when the exact script must answer: near the head, after the tail, and
// whenever the token's epoch is not the snapshot's — after a data loss the
// arrival numbers restart, and only the script can say the entry is gone
// (NOT_FOUND) rather than interpolate a place for it.
func (is *Queue) fromSnapshot(ctx context.Context, room, user, tok string, ref waitingRef) *Entry {
	if is.cfg.StatusSnapshot <= 0 {
		return nil
	}
	s := is.snapshot(ctx, room)
	if s == nil {
		return nil
	}
	return s.place(room, user, tok, ref, is.cfg.StatusSnapshot)
}

// place answers Status for ref from s (at most maxAge old when used), or
// returns nil when the exact script must answer (fromSnapshot).
func (s *snapshot) place(room, user, tok string, ref waitingRef, maxAge time.Duration) *Entry {
	seq := ref.seq
	if ref.epoch != s.epoch || seq <= s.exactThrough || seq > s.tail {
		return nil
	}
	if _, banned := s.banned[user]; banned {
		return nil
	}
	if s.laneMax > 0 && seq >= s.laneMin && seq <= s.laneMax {
		if _, lane := s.laneSeqs[seq]; lane || s.laneSeqs == nil {
			return nil // (maybe) a lane entry: its number says nothing of its place, nor of its state (it may be admitted)
		}
	}
	if (s.state == RoomClosed || seq <= s.closedSeq) && seq >= s.head && s.waiting > 0 {
		// A line that closing ended: CLOSED, whatever the place (nobody in it
		// is admitted any more), within a snapshot's age of the close.
		e := &Entry{Room: room, User: user, State: flashgate.StateClosed, Arrival: seq, Reason: s.closeReason,
			RoomState: s.state, WaitingToken: tok}
		if s.ended > 0 {
			e.EndedAt = time.UnixMilli(s.ended)
		}
		return e
	}
	later := s.waiting - s.before // the entries from head to tail, in arrival order
	if later < 2 || s.tail <= s.head || s.before+seq-s.head < s.nearHead(maxAge) {
		return nil
	}
	pos := s.priority + s.before + 1 + (seq-s.head)*(later-1)/(s.tail-s.head)
	e := &Entry{Room: room, User: user, State: flashgate.StateWaiting, Arrival: seq, Position: pos, Ahead: pos - 1,
		TotalWaiting: s.waiting + s.priority, RoomState: s.state, PositionEstimated: true, EstimatedWait: -1,
		WaitingToken: tok, Lane: flashgate.LanePublic}
	soonest := time.Duration(-1)
	if s.hasETA {
		// The rule of the exact path, from the same figures read at the
		// snapshot (the position's expiry interpolated from its sample),
		// less the snapshot's age; never below the pace floor (soonest).
		e.EstimatedWait = s.eta.wait(s.state, pos)
		soonest = s.eta.soonest(s.state, pos)
		if e.EstimatedWait > 0 {
			e.EstimatedWait = max(e.EstimatedWait-time.Since(s.at), soonest)
		}
		if s.eta.opens > 0 {
			e.OpensAt = time.UnixMilli(s.eta.opens)
		}
	}
	e.PollAfter = pollAfter(soonest)
	return e
}
