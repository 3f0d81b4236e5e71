package issuer

import (
	"math"
	"sort"
	"time"
)

// minHistory is the least history (etaFigures.window) the measured
// slot-freeing pace needs (etaFigures.freeingPace); with less — a sale's
// first seconds — the estimate is the configured pace's (docs/rooms.md "Estimated
// wait": "falling back to the configured rate when there is no history").
const minHistory = 5 * time.Second

// etaFigures are a room's measured figures at one moment, as the scripts
// gather them (lua/prelude_eta.lua eta_figures, eta_expiry): what Entry.EstimatedWait
// is computed from, on the exact path (status and enter scripts, the
// position's own expiry) and the snapshot path (snapshot script, expiry
// interpolated from a sample) alike.
type etaFigures struct {
	now            int64 // ms: the room's clock when the figures were read
	capacity, live int64
	// admits and ends count the admission log (fg:{room}:admits) and the
	// ended records (completed, expired, not claimed, revoked, left) in the
	// last window ms; window = min(60 s, now − the room's first admission),
	// 0 before any admission.
	admits, ends, window int64
	session, batch, tick int64 // ms, admissions per tick, ms
	rate                 int64 // admissions per minute (configured)
	opens                int64 // ms: the opening time while still ahead, else 0
	configured           RoomState
	// expiry is eta_expiry's answer for the position (ms; 0: none needed).
	expiry int64
	// sample holds live expiries by rank (snapshot path; see expiryAt).
	sample []rankedExpiry
}

// rankedExpiry is the j-th earliest live expiry (ms), j 1-based.
type rankedExpiry struct{ j, at int64 }

// forPosition returns the figures of the entry at pos (0: in the pre-queue)
// from a call's shared figures f, with expiry, the position's eta_expiry
// answer (ms). The measured history (admits, ends, window) is kept only when
// pos waits for capacity (pos > 0 and j = pos − capacity + live > 0): the
// one case estimate reads it, and the one case in which a script call for
// that entry alone measures it (eta_expiry calls eta_measure). A batch
// measures once for everyone in it, so without this an entry's figures
// would depend on its neighbours in the batch.
func (f etaFigures) forPosition(pos, expiry int64) etaFigures {
	f.expiry = expiry
	if pos <= 0 || pos-f.capacity+f.live <= 0 {
		f.admits, f.ends, f.window = 0, 0, 0
	}
	return f
}

// estimate is the wait of the entry at position pos (1-based), in ms from
// f.now, for an open room (docs/rooms.md#estimated-wait):
//
//	pace = min(rate / 60 s, batch / tick)      the configured pacing (a floor: pos / pace)
//	j    = pos − capacity + live               slots that must free before pos is admitted
//	wait = max(pos / pace, slot(j))            slot(j) = 0 when j ≤ 0, else the lesser of
//	  capBound(j)                              an upper bound from the live expiries: every
//	                                           admission ends by its expiry at the latest
//	  j / freeingPace()                        the slot-freeing pace measured over the last
//	                                           minute (freeingPace)
func (f etaFigures) estimate(pos int64) time.Duration {
	if pos < 1 {
		pos = 1
	}
	pace := float64(f.rate) / 60000 // admissions per ms
	if f.batch > 0 && f.tick > 0 {
		pace = min(pace, float64(f.batch)/float64(f.tick))
	}
	if pace <= 0 {
		return -1
	}
	ms := float64(pos) / pace
	if j := pos - f.capacity + f.live; j > 0 {
		if fp, ok := f.freeingPace(); ok { // no history: the pace alone
			slot := f.capBound(j)
			if fp > 0 {
				slot = min(slot, float64(j)/fp)
			}
			ms = max(ms, slot)
		}
	}
	return time.Duration(math.Round(ms)) * time.Millisecond
}

// freeingPace is the pace slots free at, per ms, measured over the window:
// the lesser of the ended records (completions, expiries, not claimed,
// revocations, leaves) and the admissions in it, since each overstates the
// freeing in its own way (leaves of waiting users; a room's initial fill).
// ok is false with less than minHistory of history: nothing measured yet.
func (f etaFigures) freeingPace() (pace float64, ok bool) {
	if f.window < minHistory.Milliseconds() {
		return 0, false
	}
	return float64(min(f.admits, f.ends)) / float64(f.window), true
}

// capBound is the latest the j-th slot to free (j ≥ 1) frees, in ms from
// f.now, if every admission runs its whole session: the j-th earliest live
// expiry for j ≤ live; beyond, each later slot is one an admission made
// after now holds, freed at most m whole sessions after the (j − m ×
// capacity)-th live expiry, or after now for a slot free now. It mirrors
// lua/prelude_eta.lua eta_expiry, which fetched the expiry this needs.
func (f etaFigures) capBound(j int64) float64 {
	var m int64
	if j > f.live && f.capacity > 0 {
		m = (j - f.live + f.capacity - 1) / f.capacity
		j -= m * f.capacity
	}
	if j < 1 {
		return float64(m * f.session)
	}
	e := f.expiry
	if f.sample != nil {
		e = f.expiryAt(j)
	}
	return float64(max(0, e-f.now) + m*f.session)
}

// expiryAt interpolates the j-th earliest live expiry (1 ≤ j ≤ live) from
// the snapshot's sample: exact at the sampled ranks, linear between them.
func (f etaFigures) expiryAt(j int64) int64 {
	s := f.sample
	if len(s) == 0 {
		return f.now + f.session
	}
	i := sort.Search(len(s), func(i int) bool { return s[i].j >= j })
	switch {
	case i == len(s):
		return s[len(s)-1].at
	case s[i].j == j || i == 0:
		return s[i].at
	}
	a, b := s[i-1], s[i]
	return a.at + (b.at-a.at)*(j-a.j)/(b.j-a.j)
}

// wait is the estimate Entry.EstimatedWait carries for the entry at pos in
// soonest is the earliest the line could reach position pos in a room in
// state: wait by the configured pace alone, as if every slot it waits for
// freed at once (completions can free them any moment) — the floor of
// estimate, and what the poll hint (pollAfter) is taken from.
func (f etaFigures) soonest(state RoomState, pos int64) time.Duration {
	f.capacity, f.live = pos, 0 // no slot term: the pace alone
	return f.wait(state, pos)
}

// a room in state: the estimate while open; while paused before its opening
// time with an open configuration (the event window), the time until it
// opens plus the estimate then (nobody has been admitted meanwhile, so the
// figures stand); −1 otherwise (paused by the operator: no known end; closed).
func (f etaFigures) wait(state RoomState, pos int64) time.Duration {
	switch {
	case state == RoomOpen:
		return f.estimate(pos)
	case state == RoomPaused && f.configured == RoomOpen && f.opens > f.now:
		if d := f.estimate(pos); d >= 0 {
			return time.Duration(f.opens-f.now)*time.Millisecond + d
		}
	}
	return -1
}
