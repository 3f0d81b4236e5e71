package restore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/cmd/flashgate/internal/restore"
	"github.com/flashgate/flashgate/internal/testing/pgtest"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/internal/testing/testkit"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/journal"
	"github.com/flashgate/flashgate/keys"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// buyer is what the test knows of one buyer from the issuer's answers: the
// journal events a producer would have written are built from it (journal).
type buyer struct {
	user, lane, tok, jti string
	arrival, enteredMs   int64
	exchangedMs          int64
	end, reason          string
	endedMs              int64
}

type sale struct {
	t      *testing.T
	is     *issuer.Issuer
	rdb    *redis.Client
	clk    *testkit.Clock
	room   string
	buyers map[string]*buyer
	order  []string // users in the order they entered
}

func (s *sale) now() int64 { return s.clk.Now().UnixMilli() }

func (s *sale) enter(user, inv string) *issuer.Entry {
	ctx := context.Background()
	var e *issuer.Entry
	var err error
	lane := flashgate.LanePublic
	if inv != "" {
		e, err = s.is.EnterWithInvite(ctx, s.room, user, inv)
		lane = flashgate.LanePriority
	} else {
		e, err = s.is.Enter(ctx, s.room, user)
	}
	require.NoError(s.t, err, user)
	s.buyers[user] = &buyer{user: user, lane: lane, tok: e.WaitingToken, arrival: e.Arrival, enteredMs: s.now(), jti: e.AdmissionID}
	s.order = append(s.order, user)
	return e
}

func (s *sale) exchange(user string) {
	b := s.buyers[user]
	a, err := s.is.Exchange(context.Background(), s.room, user, b.tok)
	require.NoError(s.t, err, user)
	b.jti, b.exchangedMs = a.ID, s.now()
}

func (s *sale) complete(user string) {
	b := s.buyers[user]
	c, err := s.is.Complete(context.Background(), s.room, user, b.jti)
	require.NoError(s.t, err, user)
	b.end, b.endedMs = "completed", c.CompletedAt.UnixMilli()
}

func (s *sale) leave(user string) {
	b := s.buyers[user]
	require.NoError(s.t, s.is.Leave(context.Background(), s.room, user, b.tok), user)
	b.end, b.endedMs = "left", s.now()
}

// tick runs one admission step and reads every buyer's status, noting
// admissions and expiries.
func (s *sale) tick() {
	_, err := s.is.Tick(context.Background(), s.room)
	require.NoError(s.t, err)
	for _, u := range s.order {
		b := s.buyers[u]
		if b.end != "" {
			continue
		}
		e, err := s.is.Status(context.Background(), s.room, u, b.tok)
		require.NoError(s.t, err, u)
		if e.AdmissionID != "" {
			b.jti = e.AdmissionID
		}
		if e.State == flashgate.StateExpired {
			b.end, b.reason, b.endedMs = "expired", e.Reason, e.EndedAt.UnixMilli()
			if b.endedMs == 0 {
				b.endedMs = e.ExpiresAt.UnixMilli()
			}
		}
	}
}

// positions answers every WAITING buyer's position.
func (s *sale) positions() map[string]int64 {
	out := map[string]int64{}
	for _, u := range s.order {
		e, err := s.is.Status(context.Background(), s.room, u, s.buyers[u].tok)
		require.NoError(s.t, err, u)
		if e.State == flashgate.StateWaiting {
			out[u] = e.Position
		}
	}
	return out
}

// journal writes the room's journal stream (fg:{room}:journal, written by
// the issuer's scripts) into the journal as `flashgate journal run` does:
// each stream entry is its events (journal.StreamEvents: the room from the
// key, the stream id as ID), then Store.Apply.
func (s *sale) journal(store *journal.Store) {
	require.NoError(s.t, store.Apply(context.Background(), streamEvents(s.t, s.rdb, s.room)))
}

func streamEvents(t *testing.T, rdb *redis.Client, room string) []journal.Event {
	msgs, err := rdb.XRange(context.Background(), "fg:{"+room+"}:journal", "-", "+").Result()
	require.NoError(t, err)
	require.NotEmpty(t, msgs)
	var evs []journal.Event
	for _, m := range msgs {
		e, bad := journal.StreamEvents(room, m.ID, func(k string) string { v, _ := m.Values[k].(string); return v })
		require.Empty(t, bad, "stream entry %s", m.ID)
		evs = append(evs, e...)
	}
	return evs
}

func stats(t *testing.T, rdb *redis.Client, room string) map[string]string {
	st, err := rdb.HGetAll(context.Background(), "fg:{"+room+"}:stats").Result()
	require.NoError(t, err)
	out := map[string]string{}
	for _, k := range []string{"admitted", "priority_admitted", "completed", "expired", "not_claimed", "left"} {
		out[k] = st[k]
	}
	return out
}

// TestRestoreAfterDataLoss: a sale (fast track, a priority lane, exchanges,
// completions, leaves, admissions expired unclaimed) is journaled, Redis
// loses everything, a replica recreates the room empty with a new epoch,
// and the restore puts back the line (same positions, tokens valid again),
// the live admissions (each completes once), the ended records (a repeated
// completion repeats) and the counters; the tick then admits in the same
// order; a second restore is refused and changes nothing.
func TestRestoreAfterDataLoss(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	clk := testkit.NewClock(testkit.Epoch.Local())
	ring, err := keys.Generate(clk.Now())
	require.NoError(t, err)
	is, err := issuer.New(issuer.Config{Redis: rdb, WaitingSecret: []byte("0123456789abcdef0123456789abcdef"),
		Signer: ring, Issuer: "https://issuer.test", Audience: "orders", Now: clk.Now})
	require.NoError(t, err)
	room := redistest.Room("restore")
	_, err = is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 5, RatePerMinute: 600, SessionDuration: time.Minute,
		Tick: time.Second, TickBatch: 100, ArrivalWindow: 30 * time.Second})
	require.NoError(t, err)
	s := &sale{t: t, is: is, rdb: rdb, clk: clk, room: room, buyers: map[string]*buyer{}}

	for i := range 60 {
		e := s.enter(fmt.Sprintf("u%03d", i), "")
		if i < 5 {
			require.Equal(t, flashgate.StateActive, e.State, "fast track")
		}
		clk.Advance(10 * time.Millisecond)
	}
	for i := range 3 {
		inv, err := is.Invites(room, issuer.InviteOptions{Lane: flashgate.LanePriority})
		require.NoError(t, err)
		require.Equal(t, flashgate.LanePriority, s.enter(fmt.Sprintf("p%d", i), inv[0].Token).Lane)
	}
	s.exchange("u000")
	s.exchange("u001")
	s.exchange("u002")
	s.complete("u000")
	s.leave("u001")
	s.leave("u010")
	clk.Advance(31 * time.Second) // u003, u004 never claimed their admission
	s.tick()
	require.Equal(t, "expired", s.buyers["u003"].end)
	require.Equal(t, "not_claimed", s.buyers["u003"].reason)
	for _, u := range []string{"p0", "p1", "p2", "u005"} {
		require.NotEmpty(t, s.buyers[u].jti, "%s admitted: the lane first, then the public head", u)
	}
	s.exchange("p0")
	s.exchange("u005")
	s.complete("p0")
	for i := 3; i < 5; i++ { // waiting in the priority lane at the loss
		inv, err := is.Invites(room, issuer.InviteOptions{Lane: flashgate.LanePriority})
		require.NoError(t, err)
		require.Equal(t, flashgate.StateWaiting, s.enter(fmt.Sprintf("p%d", i), inv[0].Token).State)
	}

	store := openStore(t)
	s.journal(store)
	before := s.positions()
	require.Len(t, before, 60-6-1+2)
	require.EqualValues(t, 1, before["p3"], "the priority lane ahead of the public line")
	statsBefore := stats(t, rdb, room)
	epoch := rdb.HGet(ctx, "fg:{"+room+"}:config", "epoch").Val()

	// Redis loses its data; a replica's tick recreates the room empty, with a new epoch.
	require.NoError(t, rdb.FlushAll(ctx).Err())
	_, err = is.Tick(ctx, room)
	require.NoError(t, err)
	require.NotEqual(t, epoch, rdb.HGet(ctx, "fg:{"+room+"}:config", "epoch").Val())
	e, err := is.Status(ctx, room, "u020", s.buyers["u020"].tok)
	require.NoError(t, err)
	require.Equal(t, flashgate.StateNotFound, e.State, "lost with Redis's data")

	res, err := restore.Room(ctx, store, rdb, room, clk.Now())
	require.NoError(t, err)
	assert.Equal(t, epoch, res.Epoch)
	assert.Equal(t, 53, res.Waiting)
	assert.Equal(t, 2, res.Priority)
	assert.Equal(t, 4, res.Live, "u002, p1, p2, u005")
	assert.Equal(t, int64(65), res.Seq)
	assert.Equal(t, epoch, rdb.HGet(ctx, "fg:{"+room+"}:config", "epoch").Val(), "the journaled epoch")
	assert.Equal(t, "open", rdb.HGet(ctx, "fg:{"+room+"}:config", "state").Val())

	assert.Equal(t, before, s.positions(), "every waiting buyer at the same place, with the same token")
	assert.Equal(t, statsBefore, stats(t, rdb, room))

	c, err := is.Complete(ctx, room, "u005", s.buyers["u005"].jti)
	require.NoError(t, err)
	assert.False(t, c.Repeated, "a live admission completes once after the restore")
	c, err = is.Complete(ctx, room, "u005", s.buyers["u005"].jti)
	require.NoError(t, err)
	assert.True(t, c.Repeated)
	c, err = is.Complete(ctx, room, "p0", s.buyers["p0"].jti)
	require.NoError(t, err)
	assert.True(t, c.Repeated, "completed before the loss: repeated, not a second order")
	assert.Equal(t, s.buyers["p0"].endedMs, c.CompletedAt.UnixMilli())
	e, err = is.Status(ctx, room, "u003", s.buyers["u003"].tok)
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateExpired, e.State)
	assert.Equal(t, issuer.ReasonNotClaimed, e.Reason)
	s.buyers["u005"].end = "completed"

	// A second restore is refused and writes nothing.
	cfgBefore := rdb.HGetAll(ctx, "fg:{"+room+"}:config").Val()
	_, err = restore.Room(ctx, store, rdb, room, clk.Now())
	require.ErrorIs(t, err, flashgate.ErrRoomNotEmpty)
	assert.Equal(t, cfgBefore, rdb.HGetAll(ctx, "fg:{"+room+"}:config").Val())
	assert.Equal(t, before, s.positions())

	// The line goes on in the same order (FIFO), admission numbers after the journaled ones.
	admno := map[string]int64{}
	for range 200 {
		if len(admno) == len(before) {
			break
		}
		clk.Advance(time.Second)
		_, err := is.Tick(ctx, room)
		require.NoError(t, err)
		for u := range before {
			if admno[u] != 0 {
				continue
			}
			e, err := is.Status(ctx, room, u, s.buyers[u].tok)
			require.NoError(t, err)
			if e.State == flashgate.StateActive {
				admno[u] = e.AdmissionNumber
				_, err := is.Complete(ctx, room, u, e.AdmissionID)
				require.NoError(t, err)
			}
		}
	}
	require.Len(t, admno, len(before))
	users := make([]string, 0, len(before))
	for u := range before {
		users = append(users, u)
	}
	sort.Slice(users, func(i, j int) bool { return before[users[i]] < before[users[j]] })
	for i := 1; i < len(users); i++ {
		assert.Less(t, admno[users[i-1]], admno[users[i]], "%s (place %d) before %s", users[i-1], before[users[i-1]], users[i])
	}
	assert.Greater(t, admno[users[0]], res.Admno)
}

func openStore(t *testing.T) *journal.Store { return benchStore(t) }

func benchStore(t testing.TB) *journal.Store {
	t.Helper()
	dsn := pgtest.Shared(t).NewDatabase(t)
	require.NoError(t, journal.Migrate(context.Background(), dsn))
	s, err := journal.Open(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// TestRestoreJournalsItsConfig: the restore writes one config room event
// (action restore, the restored epoch, the config as restored) and no entry
// event; journaled, it is the config the next RoomState reads.
func TestRestoreJournalsItsConfig(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	store := openStore(t)
	const epoch = "ab12cd34ef"
	require.NoError(t, store.Apply(ctx, []journal.Event{
		{ID: "1-0", Kind: journal.KindConfig, Room: "shop", Epoch: epoch, At: 1000, Action: "create",
			Detail: `{"state":"open","capacity":"2","rate":"60","session_ms":"600000","batch":"10","tick_ms":"1000"}`},
		{Kind: journal.KindEntered, Room: "shop", Epoch: epoch, Arrival: 1, User: "ann", Lane: "public", At: 2000},
	}))
	_, err := restore.Room(ctx, store, rdb, "shop", time.UnixMilli(3000))
	require.NoError(t, err)
	evs := streamEvents(t, rdb, "shop")
	require.Len(t, evs, 1)
	assert.Equal(t, journal.KindConfig, evs[0].Kind)
	assert.Equal(t, "restore", evs[0].Action)
	assert.Equal(t, epoch, evs[0].Epoch)
	var detail map[string]string
	require.NoError(t, json.Unmarshal([]byte(evs[0].Detail), &detail))
	assert.Equal(t, "open", detail["state"])
	assert.NotContains(t, detail, "restoring")
	assert.Equal(t, "3000", detail["clock_ms"])
}

// TestRestoreAwaitedRoom: with LostRooms await-restore a replica answers
// room_lost for the lost room (recreating nothing) until the restore, and
// then the buyer's own waiting token reads WAITING at the same place.
func TestRestoreAwaitedRoom(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	clk := testkit.NewClock(testkit.Epoch.Local())
	ring, err := keys.Generate(clk.Now())
	require.NoError(t, err)
	is, err := issuer.New(issuer.Config{Redis: rdb, WaitingSecret: []byte("0123456789abcdef0123456789abcdef"),
		Signer: ring, Issuer: "https://issuer.test", Audience: "orders", Now: clk.Now,
		LostRooms: issuer.LostRoomsAwaitRestore})
	require.NoError(t, err)
	room := redistest.Room("await")
	_, err = is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 1, RatePerMinute: 600, State: issuer.RoomPaused})
	require.NoError(t, err)
	var toks []string
	for _, u := range []string{"ann", "ben", "cid"} {
		e, err := is.Enter(ctx, room, u)
		require.NoError(t, err)
		toks = append(toks, e.WaitingToken)
	}
	store := openStore(t)
	require.NoError(t, store.Apply(ctx, streamEvents(t, rdb, room)))
	require.NoError(t, rdb.FlushAll(ctx).Err())
	_, err = is.Tick(ctx, room)
	require.ErrorIs(t, err, flashgate.ErrRoomLost)
	_, err = is.Status(ctx, room, "ben", toks[1])
	require.ErrorIs(t, err, flashgate.ErrRoomLost)

	_, err = restore.Room(ctx, store, rdb, room, clk.Now())
	require.NoError(t, err)
	e, err := is.Status(ctx, room, "ben", toks[1])
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateWaiting, e.State)
	assert.EqualValues(t, 2, e.Position)
}
