package issuer

import (
	"context"
	"encoding/json"
	"maps"
	"strconv"
	"time"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer/store"
)

// Restoring a room after Redis lost its data (docs/operations.md#restoring-a-room;
// `flashgate restore`): the room's newest line, as the journal in
// PostgreSQL recorded it (journal.Store.RoomState), is written back into
// Redis by lua/restore.lua, with the journaled epoch, so the waiting tokens
// and admission ids minted before the loss work again (invariant 6: same
// epoch, same arrival and admission numbers).

// RestoreEntry is one journaled entry of the line being restored (the
// columns of journal_entries, journal/doc.go). Times have millisecond
// precision on the room's clock; a zero time is "not journaled".
type RestoreEntry struct {
	Arrival int64  // ≥ 1
	User    string // "" when no journaled event named the user
	Lane    string // flashgate.LanePublic, LanePriority, LaneBypass; "" read as public
	// AdmissionID is the admission's jti ("" until admitted).
	AdmissionID                                 string
	EnteredAt, AdmittedAt, ExchangedAt, EndedAt time.Time
	// End is completed, revoked, expired, left or closed; "" while live.
	// EndReason refines it (expired: not_claimed or session_ended).
	End, EndReason string
}

// RestoreState is what Restore writes (journal.RoomState, converted).
type RestoreState struct {
	// Epoch is the journaled epoch the room gets back.
	Epoch string
	// Config is the room's config hash as last journaled (field → value).
	Config map[string]string
	// Entries: the epoch's entries not ended, and those ended within the
	// ended-records horizon (max(2 × session, 10 min)); any order.
	Entries []RestoreEntry
	// MaxArrival and MaxAdmission are the seq and admno counters.
	MaxArrival, MaxAdmission int64
	// Clock is the latest journaled time of the room (its clock_ms).
	Clock time.Time
	// Stats are the stats hash's counters (journal.RoomState.Stats).
	Stats map[string]int64
	// PreQueueBefore counts the epoch's entries up to the lottery's cutoff.
	PreQueueBefore int64
}

// RestoreResult summarises a restore.
type RestoreResult struct {
	Epoch    string
	Waiting  int   // public entries put back in line
	Priority int   // entries put back in the priority lane
	Live     int   // admissions put back in active (some may have lapsed meanwhile: the tick ends them)
	Ended    int   // ended records put back (C/R/E/N/L)
	Calls    int   // script calls made
	Seq      int64 // the arrival counter
	Admno    int64 // the admission counter
}

// RestoreBatch is the most members one restore script call writes.
const RestoreBatch = 1000

// Restore writes st into room's keys in Redis, in script calls of at most
// RestoreBatch members (lua/restore.lua):
//
//   - the first call checks the room has no entry (seq 0, nothing waiting,
//     in the priority lane, active or in users: else flashgate.ErrRoomNotEmpty,
//     and nothing is written), writes the journaled config with the journaled
//     epoch, clock_ms = max(st.Clock, now), the stats, seq and admno, and
//     marks the room as being restored (config field restoring = the state to
//     put back; state paused meanwhile): until the last call every other
//     script refuses the room (flashgate.ErrRoomLost, 503 room_lost), so
//     nobody reads, enters or is admitted from a line half written;
//   - then the live admissions (active, with expiry admitted + session; users;
//     unclaimed with admitted + arrival window when the window is on and the
//     admission was not exchanged; admits, those of the last 60 s), the ended
//     records, the priority lane (and laneseqs) and the public line (score =
//     arrival number, so the same order);
//   - the last call puts the state back.
//
// A restore interrupted midway leaves the room paused with restoring set;
// running Restore again with the same epoch resumes (every write is
// absolute). A shuffle room whose lottery was drawn keeps its seed, cutoff
// and bits without lottery_done_ms: the tick places the pre-queue again,
// deterministically, before admitting anyone; one not drawn yet gets a fresh
// seed. now is the room's clock (ms precision). Errors:
// flashgate.ErrInvalidInput (bad room id or epoch), ErrRoomNotEmpty,
// ErrUnavailable.
func Restore(ctx context.Context, rdb Redis, room string, st RestoreState, now time.Time) (RestoreResult, error) {
	return restore(ctx, rdb, room, st, now, 0)
}

// restore is Restore stopping after stopAfter script calls (0: none), for
// tests of an interrupted restore.
func restore(ctx context.Context, rdb Redis, room string, st RestoreState, now time.Time, stopAfter int) (RestoreResult, error) {
	res := RestoreResult{Epoch: st.Epoch, Seq: st.MaxArrival, Admno: st.MaxAdmission}
	if err := checkRoom(room); err != nil {
		return res, err
	}
	if !flashgate.ValidEpoch(st.Epoch) {
		return res, flashgate.Errorf(flashgate.CodeInvalidInput, "restore: %q is not a room epoch", st.Epoch)
	}
	clock := max(st.Clock.UnixMilli(), now.UnixMilli())
	cfg := maps.Clone(st.Config)
	if cfg == nil {
		cfg = map[string]string{}
	}
	cfg["epoch"] = st.Epoch
	if cfg["prequeue"] == string(PreQueueShuffle) && cfg["lottery_cutoff"] == "" && cfg["lottery_seed"] == "" {
		cfg["lottery_seed"] = newLotterySeed() // not drawn: the journal never saw the secret seed
	}
	if cfg["prequeue"] == string(PreQueueShuffle) {
		// The issuer's next tick journals the commitment of what it will draw
		// (why "restored") and records it on the room view (lottery_reveal.go).
		cfg["lottery_restored_ms"] = strconv.FormatInt(now.UnixMilli(), 10)
	}
	num := func(k string) int64 { n, _ := strconv.ParseInt(cfg[k], 10, 64); return n }
	session, arrival, cutoff := num("session_ms"), num("arrival_ms"), num("lottery_cutoff")

	type member struct{ score, name string }
	var active, unclaimed, admits, ended, priority, laneseqs, waiting []member
	var users []member // user → jti
	drawnBack := int64(0)
	d := func(n int64) string { return strconv.FormatInt(n, 10) }
	for _, e := range st.Entries {
		seq := d(e.Arrival)
		if e.End != "" {
			kind := map[string]string{"completed": "C", "revoked": "R", "left": "L", "expired": "E"}[e.End]
			if e.End == "expired" && e.EndReason == "not_claimed" {
				kind = "N"
			}
			if kind != "" { // closed: status answers it from closed_seq, no record
				ended = append(ended, member{d(e.EndedAt.UnixMilli()), kind + ":" + st.Epoch + "." + seq})
			}
			continue
		}
		lane := e.Lane
		if e.AdmissionID != "" {
			at := e.AdmittedAt.UnixMilli()
			if id, ok := flashgate.ParseAdmissionID(e.AdmissionID); ok {
				at = id.AdmittedAt.UnixMilli()
			}
			active = append(active, member{d(at + session), e.AdmissionID})
			if arrival > 0 && arrival < session && e.ExchangedAt.IsZero() {
				unclaimed = append(unclaimed, member{d(at + arrival), e.AdmissionID})
			}
			if at > clock-60_000 {
				admits = append(admits, member{d(at), e.AdmissionID})
			}
			if e.User != "" {
				users = append(users, member{e.User, e.AdmissionID})
			}
		} else if e.User == "" {
			continue // a waiting entry whose entered event was not journaled: nobody to put back
		} else if lane == flashgate.LanePriority || lane == flashgate.LaneBypass {
			priority = append(priority, member{seq, e.User})
		} else {
			waiting = append(waiting, member{seq, e.User})
			if cutoff > 0 && e.Arrival <= cutoff {
				drawnBack++
			}
		}
		if lane == flashgate.LanePriority || lane == flashgate.LaneBypass {
			laneseqs = append(laneseqs, member{seq, seq})
		}
	}
	stats := maps.Clone(st.Stats)
	if stats == nil {
		stats = map[string]int64{}
	}
	stats["peak_active"] = max(stats["peak_active"], int64(len(active))) // a lower bound: the journal has no peak
	if cutoff > 0 {
		stats["drawn"] = max(0, st.PreQueueBefore-drawnBack) // the tick counts the ones it places again
	}
	cfgJSON, _ := json.Marshal(cfg)
	statsJSON, _ := json.Marshal(stats)

	nowArg := d(clock)
	db := store.New(rdb, store.Options{})
	call := func(step string, args ...any) error {
		if stopAfter > 0 && res.Calls >= stopAfter {
			return flashgate.Errorf(flashgate.CodeUnavailable, "restore: stopped after %d calls (test)", stopAfter)
		}
		err := db.Restore(ctx, room, nowArg, step, st.Epoch, args...)
		res.Calls++
		return err
	}
	if err := call("begin", string(cfgJSON), string(statsJSON), d(st.MaxArrival), d(st.MaxAdmission), nowArg); err != nil {
		return res, err
	}
	if err := rdb.SAdd(ctx, keyRooms, room).Err(); err != nil {
		return res, unavailable(err)
	}
	for _, part := range []struct {
		target string
		ms     []member
	}{{"active", active}, {"unclaimed", unclaimed}, {"users", users}, {"admits", admits}, {"ended", ended},
		{"priority", priority}, {"laneseqs", laneseqs}, {"waiting", waiting}} {
		for i := 0; i < len(part.ms); i += RestoreBatch {
			chunk := part.ms[i:min(i+RestoreBatch, len(part.ms))]
			args := make([]any, 0, 1+2*len(chunk))
			args = append(args, part.target)
			for _, m := range chunk {
				args = append(args, m.score, m.name) // users: field user, value jti
			}
			if err := call("members", args...); err != nil {
				return res, err
			}
		}
	}
	if err := call("finish"); err != nil {
		return res, err
	}
	res.Waiting, res.Priority, res.Live, res.Ended = len(waiting), len(priority), len(active), len(ended)
	return res, nil
}
