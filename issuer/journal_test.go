package issuer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/internal/testing/testkit"
	"github.com/flashgate/flashgate/issuer"
)

// journalEntry is one event of a room's journal stream: a room event is a
// stream entry of its own, an entry event one line of a batch entry.
type journalEntry struct {
	id     string   // the stream entry's id (the events of one batch share it)
	fields []string // the stream entry's field names, in order
	v      map[string]string
}

// readJournal reads room's journal stream, each batch entry expanded into
// its events by the contract's encoding (docs/operations.md#durability):
// one event per line, its fields entryFields after kind and epoch,
// comma-separated.
func readJournal(t *testing.T, rdb *redis.Client, room string) []journalEntry {
	t.Helper()
	raw, err := rdb.Do(context.Background(), "XRANGE", issuer.RoomKeys(room)[16], "-", "+").Slice()
	require.NoError(t, err)
	var out []journalEntry
	for _, r := range raw {
		e := r.([]any)
		kv := e[1].([]any)
		je := journalEntry{id: e[0].(string), v: map[string]string{}}
		for i := 0; i < len(kv); i += 2 {
			je.fields = append(je.fields, kv[i].(string))
			je.v[kv[i].(string)] = kv[i+1].(string)
		}
		if je.v["kind"] != "batch" {
			out = append(out, je)
			continue
		}
		for _, line := range strings.Split(je.v["events"], "\n") {
			f := strings.Split(line, ",")
			require.Len(t, f, len(entryFields)-1, "event %q: the fields after epoch", line)
			ev := journalEntry{id: je.id, fields: je.fields, v: map[string]string{"epoch": je.v["epoch"]}}
			for i, name := range slices.Delete(slices.Clone(entryFields), 1, 2) {
				ev.v[name] = f[i]
			}
			out = append(out, ev)
		}
	}
	return out
}

// The stream layouts the journal consumer reads (journal/doc.go): a batch
// entry's fields, and the fields of each of its events (its lines: all but
// epoch, which is the entry's), and a room event's fields.
var (
	batchFields = []string{"kind", "epoch", "events"}
	entryFields = []string{"kind", "epoch", "seq", "user", "lane", "at", "admission", "reason", "eta"}
	roomFields  = []string{"kind", "epoch", "at", "actor", "action", "detail"}
)

// TestJournalRecordsEveryChange runs one of each state change of an entry
// and of the room's config through the issuer and reads the room's journal
// stream: one entry per change, in the order they happened, each with the
// contract's fields in the contract's order (docs/operations.md#durability).
func TestJournalRecordsEveryChange(t *testing.T) {
	ctx := context.Background()
	is, clk, room, rdb := setup(t, issuer.RoomConfig{Capacity: 1, SessionDuration: 10 * time.Second})

	alice, err := is.Enter(ctx, room, "alice") // fast track: entered + admitted
	require.NoError(t, err)
	require.Equal(t, flashgate.StateActive, alice.State)
	var tok = map[string]string{}
	for _, u := range []string{"bob", "carol", "dave"} {
		e, err := is.Enter(ctx, room, u)
		require.NoError(t, err)
		tok[u] = e.WaitingToken
	}
	_, err = is.Exchange(ctx, room, "alice", alice.WaitingToken)
	require.NoError(t, err)
	_, err = is.Complete(ctx, room, "alice", alice.AdmissionID)
	require.NoError(t, err)
	_, err = is.Tick(ctx, room) // bob admitted
	require.NoError(t, err)
	require.NoError(t, is.Leave(ctx, room, "carol", tok["carol"]))
	noBan := time.Duration(0)
	_, err = is.RevokeWith(ctx, room, "bob", "", issuer.RevokeOptions{Ban: &noBan})
	require.NoError(t, err)
	_, err = is.Tick(ctx, room) // dave admitted
	require.NoError(t, err)
	_, err = is.Enter(ctx, room, "erin") // waits behind dave
	require.NoError(t, err)
	_, err = is.Close(ctx, room, issuer.ReasonSoldOut)
	require.NoError(t, err)
	clk.Advance(10 * time.Second)
	_, err = is.Tick(ctx, room) // dave's session ended; erin drained (no event: the end covers her)
	require.NoError(t, err)

	js := readJournal(t, rdb, room)
	st, err := is.Stats(ctx, room)
	require.NoError(t, err)
	epoch := st.Epoch
	require.NotEmpty(t, epoch)

	type want struct{ kind, user, seq, lane, reason string }
	wants := []want{
		{"config", "", "", "", "configure"}, // SetRoom
		{"entered", "alice", "1", "public", ""},
		{"admitted", "alice", "1", "public", ""},
		{"entered", "bob", "2", "public", ""},
		{"entered", "carol", "3", "public", ""},
		{"entered", "dave", "4", "public", ""},
		{"exchanged", "alice", "1", "", ""},
		{"completed", "alice", "1", "", ""},
		{"admitted", "bob", "2", "public", ""},
		{"left", "carol", "3", "", ""},
		{"revoked", "bob", "2", "", "admin"},
		{"admitted", "dave", "4", "public", ""},
		{"entered", "erin", "5", "public", ""},
		{"config", "", "", "", "end"},       // the close's note_end …
		{"config", "", "", "", "configure"}, // … and the configure itself
		{"expired", "", "4", "", "session_ended"},
	}
	var got []string
	for _, e := range js {
		got = append(got, e.v["kind"]+" "+e.v["user"]+e.v["action"])
	}
	require.Len(t, js, len(wants), "journal: %v", got)
	lastAt := int64(0)
	for i, w := range wants {
		e := js[i]
		at := mustInt(t, e.v["at"])
		assert.GreaterOrEqual(t, at, lastAt, "entry %d: times never run backwards", i)
		lastAt = at
		assert.Equal(t, epoch, e.v["epoch"], "entry %d", i)
		assert.Equal(t, w.kind, e.v["kind"], "entry %d", i)
		if w.kind == "config" {
			assert.Equal(t, roomFields, e.fields, "entry %d: the room event layout", i)
			assert.Equal(t, w.reason, e.v["action"], "entry %d", i)
			var detail map[string]string
			require.NoError(t, json.Unmarshal([]byte(e.v["detail"]), &detail), "entry %d: detail is a JSON object of strings", i)
			assert.Equal(t, "1", detail["capacity"])
			assert.Equal(t, epoch, detail["epoch"])
			continue
		}
		assert.Equal(t, batchFields, e.fields, "entry %d (%s): in a batch entry", i, w.kind)
		assert.Equal(t, w.user, e.v["user"], "entry %d", i)
		assert.Equal(t, w.seq, e.v["seq"], "entry %d", i)
		assert.Equal(t, w.lane, e.v["lane"], "entry %d", i)
		assert.Equal(t, w.reason, e.v["reason"], "entry %d", i)
		switch w.kind {
		case "admitted", "exchanged", "completed", "revoked", "expired":
			id, ok := flashgate.ParseAdmissionID(e.v["admission"])
			require.True(t, ok, "entry %d: admission %q", i, e.v["admission"])
			assert.Equal(t, epoch, id.Epoch)
			assert.EqualValues(t, mustInt(t, w.seq), id.Arrival)
		default:
			assert.Empty(t, e.v["admission"], "entry %d", i)
		}
	}
	var end map[string]string
	require.NoError(t, json.Unmarshal([]byte(js[13].v["detail"]), &end))
	assert.Equal(t, "5", end["closed_seq"], "the end's closed_seq covers erin: the line it closed (no event per drained entry)")
	assert.Equal(t, "sold_out", end["close_reason"])
	assert.NotEmpty(t, end["ended_ms"])
	assert.Equal(t, alice.AdmissionID, js[2].v["admission"], "the admission journaled is the one the buyer holds")
	assert.Equal(t, js[2].v["admission"], js[7].v["admission"], "completed names the admission")
	// One stream entry per script call: the fast track's entered and admitted share one, each
	// later enter (a call of its own here) has its own.
	assert.Equal(t, js[1].id, js[2].id, "alice's enter: one batch entry")
	assert.NotEqual(t, js[2].id, js[3].id)
	assert.NotEqual(t, js[3].id, js[4].id)
}

// TestJournalLanesBansAndDrawsRecorded: the priority lane and bypass invites
// journal their lane, a ban's removals are revocations with reason banned,
// and the lottery's draw is a config event whose detail reveals the seed only
// from the draw on, its commitment an audit event from the configuration on
// (docs/rooms.md#pre-queue-lottery).
func TestJournalLanesBansAndDrawsRecorded(t *testing.T) {
	ctx := context.Background()
	opens := testkit.Epoch.Add(time.Hour)
	is, clk, room, rdb, _ := laneSetup(t, issuer.RoomConfig{Capacity: 1, PreQueue: issuer.PreQueueShuffle, Opens: opens})
	for _, u := range []string{"p1", "p2", "p3"} {
		_, err := is.Enter(ctx, room, u)
		require.NoError(t, err)
	}
	_, err := is.Ban(ctx, room, "p2", time.Minute, "scalper")
	require.NoError(t, err)
	enterInvite(t, is, room, "vip", invite(t, is, room, issuer.InviteOptions{Lane: flashgate.LanePriority}))
	clk.Set(opens.Add(time.Second))
	_, err = is.Tick(ctx, room) // draws and places, admits nobody yet
	require.NoError(t, err)
	_, err = is.Tick(ctx, room) // admits vip, ahead of the public line
	require.NoError(t, err)

	js := readJournal(t, rdb, room)
	var kinds []string
	for _, e := range js {
		k := e.v["kind"]
		if k == "config" {
			k += ":" + e.v["action"]
			var d map[string]string
			require.NoError(t, json.Unmarshal([]byte(e.v["detail"]), &d))
			_, seed := d["lottery_seed"]
			assert.Equal(t, e.v["action"] == "draw", seed, "the seed is journaled from the draw on only: %s", e.v["action"])
		} else if k == "audit" { // the commitment, journaled when the seed is written; never the seed
			k += ":" + e.v["action"]
			var d map[string]string
			require.NoError(t, json.Unmarshal([]byte(e.v["detail"]), &d))
			assert.Len(t, d["commitment"], 64)
			if e.v["action"] != issuer.ActionLotteryReveal { // the reveal, after the cutoff, publishes secret and seed
				assert.NotContains(t, d, "seed")
			}
		} else {
			k += ":" + e.v["user"] + ":" + e.v["lane"] + ":" + e.v["reason"]
		}
		kinds = append(kinds, k)
	}
	assert.Equal(t, []string{
		"config:configure",
		"audit:lottery_commit",
		"entered:p1:public:", "entered:p2:public:", "entered:p3:public:",
		"revoked:p2::banned",
		"entered:vip:priority:",
		"config:draw",
		"audit:lottery_reveal", // the issuer reveals the derived seed after the cutoff (issue 36)
		"admitted:vip:priority:",
	}, kinds)
}

// TestJournalOff: a negative Config.JournalMaxLen writes no journal, and the
// bound is written into the room's config (journal_maxlen).
func TestJournalOff(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	for _, tc := range []struct {
		max  int64
		want string
	}{{0, fmt.Sprint(issuer.DefaultJournalMaxLen)}, {-1, "0"}, {500, "500"}} {
		is := newIssuer(t, rdb, newClock(), func(c *issuer.Config) { c.JournalMaxLen = tc.max })
		room := redistest.Room("j")
		_, err := is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 1})
		require.NoError(t, err)
		_, err = is.Enter(ctx, room, "alice")
		require.NoError(t, err)
		v, err := rdb.HGet(ctx, issuer.RoomKeys(room)[0], "journal_maxlen").Result()
		require.NoError(t, err)
		assert.Equal(t, tc.want, v)
		n, err := rdb.XLen(ctx, issuer.RoomKeys(room)[16]).Result()
		require.NoError(t, err)
		if tc.want == "0" {
			assert.Zero(t, n, "no journal")
		} else {
			assert.EqualValues(t, 2, n, "configure, then the enter's batch: entered, admitted")
		}
	}
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	_, err := fmt.Sscan(strings.TrimSpace(s), &n)
	require.NoError(t, err, "%q", s)
	return n
}

// TestLostRoomAwaitsRestore: under LostRoomsAwaitRestore a room this replica
// knew, found lost from Redis, is not recreated empty: every call for it
// answers flashgate.ErrRoomLost (503 room_lost) and nothing is written, until
// an operator recreates it (here SetRoom; in production `flashgate restore`).
func TestLostRoomAwaitsRestore(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	is := newIssuer(t, rdb, newClock(), func(c *issuer.Config) { c.LostRooms = issuer.LostRoomsAwaitRestore })
	room := redistest.Room("lost")
	_, err := is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 1})
	require.NoError(t, err)
	_, err = is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	bob, err := is.Enter(ctx, room, "bob")
	require.NoError(t, err)

	require.NoError(t, rdb.FlushAll(ctx).Err())
	_, err = is.Tick(ctx, room)
	assert.ErrorIs(t, err, flashgate.ErrRoomLost, "the tick does not recreate it")
	_, err = is.Enter(ctx, room, "carol")
	assert.ErrorIs(t, err, flashgate.ErrRoomLost, "nor does an enter")
	_, err = is.Status(ctx, room, "bob", bob.WaitingToken)
	assert.ErrorIs(t, err, flashgate.ErrRoomLost, "bob's place is not NOT_FOUND: it awaits the restore")
	assert.ErrorIs(t, is.Leave(ctx, room, "bob", bob.WaitingToken), flashgate.ErrRoomLost)
	n, err := rdb.DBSize(ctx).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "nothing written while the room awaits its restore")
	_, err = is.Enter(ctx, redistest.Room("never-known"), "dave")
	assert.ErrorIs(t, err, flashgate.ErrUnknownRoom, "a room this replica never knew is unknown, not lost")

	_, err = is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 1})
	require.NoError(t, err)
	e, err := is.Enter(ctx, room, "carol")
	require.NoError(t, err, "recreated by the operator")
	assert.Equal(t, flashgate.StateActive, e.State)

	// The default (recreate) is unchanged: the next enter recreates it.
	rec := newIssuer(t, rdb, newClock())
	room2 := redistest.Room("recreated")
	_, err = rec.SetRoom(ctx, room2, issuer.RoomConfig{Capacity: 1})
	require.NoError(t, err)
	require.NoError(t, rdb.FlushAll(ctx).Err())
	_, err = rec.Enter(ctx, room2, "erin")
	assert.NoError(t, err)
}

// shownEstimates maps each user of room's entered events to its eta field
// (the estimate the enter reply showed, ms; "" for none).
func shownEstimates(t *testing.T, rdb *redis.Client, room string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range readJournal(t, rdb, room) {
		if e.v["kind"] == "entered" {
			out[e.v["user"]] = e.v["eta"]
		}
	}
	return out
}

// The entered event journals the estimate the enter reply showed (the
// journal's estimate-error metric compares it with the real wait): the
// script computes it from the figures Go computes the reply's from
// (lua/prelude_eta.lua eta_shown mirrors issuer/entry.go), and it must be the
// same number in every case the rule has: the configured pace, capacity
// bound by the live expiries (and whole sessions beyond), the measured
// freeing pace, a room paused until its opening time, a batch of enters;
// none for a fast track, a pre-queue place or a room paused by the operator.
func TestJournalEnteredCarriesTheShownEstimate(t *testing.T) {
	ctx := context.Background()
	check := func(t *testing.T, rdb *redis.Client, room string, es ...*issuer.Entry) {
		t.Helper()
		shown := shownEstimates(t, rdb, room)
		for _, e := range es {
			want := ""
			if e.State == flashgate.StateWaiting && e.EstimatedWait >= 0 {
				want = fmt.Sprint(e.EstimatedWait.Milliseconds())
			}
			assert.Equal(t, want, shown[e.User], "%s (position %d, %s)", e.User, e.Position, e.State)
		}
	}
	t.Run("capacity bound and measured pace", func(t *testing.T) {
		is, clk, room, rdb := setup(t, issuer.RoomConfig{Capacity: 3, RatePerMinute: 600, SessionDuration: 5 * time.Minute,
			ArrivalWindow: issuer.ArrivalWindowOff})
		var all, live []*issuer.Entry
		for _, u := range []string{"a", "b", "c"} {
			e, err := is.Enter(ctx, room, u)
			require.NoError(t, err)
			require.Equal(t, flashgate.StateActive, e.State)
			all, live = append(all, e), append(live, e)
			clk.Advance(7 * time.Second)
		}
		for i := range 8 { // expiries, then whole sessions beyond them
			all = append(all, waitingEntry(t, is, room, fmt.Sprint("w", i)))
		}
		for _, e := range live[:2] { // two ends: a measured pace after 5 s of history
			clk.Advance(3 * time.Second)
			_, err := is.Complete(ctx, room, e.User, e.AdmissionID)
			require.NoError(t, err)
			_, err = is.Tick(ctx, room)
			require.NoError(t, err)
		}
		clk.Advance(1234 * time.Millisecond)
		es := make([]*issuer.Entry, 4) // concurrent enters: batched into script calls (batch.go)
		var wg sync.WaitGroup
		for i := range es {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e, err := is.Enter(ctx, room, fmt.Sprint("x", i))
				assert.NoError(t, err)
				es[i] = e
			}()
		}
		wg.Wait()
		all = append(all, es...)
		check(t, rdb, room, all...)
	})
	t.Run("paused until it opens, then by the operator", func(t *testing.T) {
		is, clk, room, rdb := setup(t, issuer.RoomConfig{Capacity: 10, RatePerMinute: 7})
		opens := clk.Now().Add(10 * time.Minute)
		_, _, err := is.UpdateRoom(ctx, room, issuer.RoomPatch{Opens: &opens})
		require.NoError(t, err)
		a := waitingEntry(t, is, room, "a")
		b := waitingEntry(t, is, room, "b")
		require.Positive(t, b.EstimatedWait)
		_, err = is.SetState(ctx, room, issuer.RoomPaused)
		require.NoError(t, err)
		c := waitingEntry(t, is, room, "c")
		require.Equal(t, time.Duration(-1), c.EstimatedWait)
		check(t, rdb, room, a, b, c)
	})
	t.Run("pre-queue", func(t *testing.T) {
		opens := newClock().Now().Add(10 * time.Minute) // setup's clock starts where a new one does
		is, _, room, rdb := setup(t, issuer.RoomConfig{Capacity: 10, RatePerMinute: 600, PreQueue: issuer.PreQueueShuffle,
			Opens: opens})
		a := waitingEntry(t, is, room, "a")
		require.True(t, a.PreQueue)
		check(t, rdb, room, a)
	})
}

// TestJournalOneEntryPerCall: the entry events of one script call are one
// stream entry (a batch), at most 256 events each: a tick that admits 300
// writes two, of 256 and 44 admissions, in admission order.
func TestJournalOneEntryPerCall(t *testing.T) {
	ctx := context.Background()
	cfg := issuer.RoomConfig{Capacity: 1000, RatePerMinute: 100_000, TickBatch: 1000, State: issuer.RoomPaused}
	is, _, room, rdb := setup(t, cfg)
	const n = 300
	for i := 1; i <= n; i++ {
		_, err := is.Enter(ctx, room, fmt.Sprintf("u%d", i))
		require.NoError(t, err)
	}
	cfg.State = issuer.RoomOpen
	_, err := is.SetRoom(ctx, room, cfg)
	require.NoError(t, err)
	before, err := rdb.XLen(ctx, issuer.RoomKeys(room)[16]).Result()
	require.NoError(t, err)
	tk, err := is.Tick(ctx, room)
	require.NoError(t, err)
	require.Equal(t, n, tk.Admitted)
	after, err := rdb.XLen(ctx, issuer.RoomKeys(room)[16]).Result()
	require.NoError(t, err)
	assert.EqualValues(t, 2, after-before, "300 admissions in one tick: two batch entries")
	per := map[string]int{}
	var ids []string
	seq := 0
	for _, e := range readJournal(t, rdb, room) {
		if e.v["kind"] != "admitted" {
			continue
		}
		seq++
		assert.Equal(t, fmt.Sprint(seq), e.v["seq"], "in admission order")
		if per[e.id] == 0 {
			ids = append(ids, e.id)
		}
		per[e.id]++
	}
	require.Len(t, ids, 2)
	assert.Equal(t, 256, per[ids[0]])
	assert.Equal(t, 44, per[ids[1]])
}
