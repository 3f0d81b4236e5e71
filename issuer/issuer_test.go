package issuer_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
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
	"github.com/flashgate/flashgate/verifier"
)

// newClock is a fake clock (testkit.Clock) that moves only when told,
// shared by several issuer replicas.
func newClock() *testkit.Clock { return testkit.NewClock(testkit.Epoch.Local()) } // Local, as time.UnixMilli reads

// testSigner signs like keys.Ring: header {"alg":"EdDSA","kid":"k1","typ":verifier.TokenType}.
type testSigner struct{ priv ed25519.PrivateKey }

func newSigner() *testSigner {
	return &testSigner{ed25519.NewKeyFromSeed(make([]byte, 32))}
}

func (s *testSigner) Sign(payload []byte) (string, error) {
	h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"EdDSA","kid":"k1","typ":"` + verifier.TokenType + `"}`))
	in := h + "." + base64.RawURLEncoding.EncodeToString(payload)
	return in + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(s.priv, []byte(in))), nil
}

var secret = []byte("0123456789abcdef0123456789abcdef")

func newIssuer(t testing.TB, rdb issuer.Redis, clk *testkit.Clock, mod ...func(*issuer.Config)) *issuer.Issuer {
	t.Helper()
	cfg := issuer.Config{Redis: rdb, WaitingSecret: secret, Signer: newSigner(), Issuer: "https://issuer.test", Audience: "orders"}
	if clk != nil {
		cfg.Now = clk.Now
	}
	for _, m := range mod {
		m(&cfg)
	}
	is, err := issuer.New(cfg)
	require.NoError(t, err)
	return is
}

func setup(t testing.TB, c issuer.RoomConfig) (*issuer.Issuer, *testkit.Clock, string, *redis.Client) {
	t.Helper()
	rdb := redistest.Start(t).Client(t)
	clk := newClock()
	is := newIssuer(t, rdb, clk)
	room := redistest.Room("room")
	_, err := is.SetRoom(context.Background(), room, c)
	require.NoError(t, err)
	return is, clk, room, rdb
}

func TestEnterIsIdempotentAndFastTracks(t *testing.T) {
	ctx := context.Background()
	is, _, room, _ := setup(t, issuer.RoomConfig{Capacity: 1, RatePerMinute: 600})

	a, err := is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateActive, a.State, "empty room, free capacity: fast track")
	assert.NotEmpty(t, a.AdmissionID)

	b, err := is.Enter(ctx, room, "bob")
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateWaiting, b.State, "capacity 1 is taken")
	assert.EqualValues(t, 1, b.Position)
	assert.EqualValues(t, 0, b.Ahead)

	c, err := is.Enter(ctx, room, "carol")
	require.NoError(t, err)
	assert.EqualValues(t, 2, c.Position)
	assert.EqualValues(t, 2, c.TotalWaiting)
	// No history yet (docs/rooms.md#estimated-wait): the configured pace, the
	// head one admission step at 600/min (not 0), carol two; the poll hint
	// is half the soonest, at least 1 s, ±20 %.
	assert.Equal(t, 100*time.Millisecond, b.EstimatedWait, "the head: one step")
	assert.Equal(t, 200*time.Millisecond, c.EstimatedWait, "two steps")
	assert.True(t, c.PollAfter >= 800*time.Millisecond && c.PollAfter <= 1200*time.Millisecond, "poll hint %s", c.PollAfter)

	again, err := is.Enter(ctx, room, "bob")
	require.NoError(t, err)
	assert.Equal(t, b.WaitingToken, again.WaitingToken, "a refresh returns the same waiting token")
	assert.Equal(t, b.Position, again.Position)

	a2, err := is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	assert.Equal(t, a.AdmissionID, a2.AdmissionID, "an admitted user keeps the admission")
}

func TestStatusOwnershipAndBadTokens(t *testing.T) {
	ctx := context.Background()
	is, _, room, _ := setup(t, issuer.RoomConfig{Capacity: 1})
	_, err := is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	bob, err := is.Enter(ctx, room, "bob")
	require.NoError(t, err)

	st, err := is.Status(ctx, room, "bob", bob.WaitingToken)
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateWaiting, st.State)

	_, err = is.Status(ctx, room, "mallory", bob.WaitingToken)
	assert.ErrorIs(t, err, flashgate.ErrOwnerMismatch, "another user's waiting token")
	assert.Contains(t, err.Error(), "token owner mismatch")

	other := redistest.Room("other")
	_, err = is.SetRoom(ctx, other, issuer.RoomConfig{})
	require.NoError(t, err)
	_, err = is.Status(ctx, other, "bob", bob.WaitingToken)
	assert.ErrorIs(t, err, flashgate.ErrOwnerMismatch, "a token of another room")

	for _, tok := range []string{"", "garbage", "fgw2_", "fgw2_AAAA_e_0_AAAAAAAAAAAAAAAAAAAAAA",
		"fgw2_AAAA_e_01_AAAAAAAAAAAAAAAAAAAAAA", "fgw2_AAAA_E_1_AAAAAAAAAAAAAAAAAAAAAA", "fgw2_AAA_e_1_AAAAAAAAAAAAAAAAAAAAAA",
		"fgw2_AAAA_e_1_AAAA", "fgw1_1_AAAAAAAAAAAAAAAAAAAAAA", strings.Repeat("x", 5000), "eyJhbGciOiJFZERTQSJ9.e30.AAAA"} {
		_, err = is.Status(ctx, room, "bob", tok)
		assert.ErrorIs(t, err, flashgate.ErrBadWaiting, "token %q", tok)
	}
	_, err = is.Status(ctx, "bad{room}", "bob", bob.WaitingToken)
	assert.ErrorIs(t, err, flashgate.ErrInvalidInput)
	_, err = is.Enter(ctx, room, "bad user")
	assert.ErrorIs(t, err, flashgate.ErrInvalidInput)
	_, err = is.Enter(ctx, "nope-"+room, "bob")
	assert.ErrorIs(t, err, flashgate.ErrUnknownRoom)
}

func TestLeave(t *testing.T) {
	ctx := context.Background()
	is, _, room, _ := setup(t, issuer.RoomConfig{Capacity: 1})
	alice, _ := is.Enter(ctx, room, "alice")
	bob, _ := is.Enter(ctx, room, "bob")
	carol, _ := is.Enter(ctx, room, "carol")

	require.NoError(t, is.Leave(ctx, room, "bob", bob.WaitingToken))
	assert.ErrorIs(t, is.Leave(ctx, room, "bob", bob.WaitingToken), flashgate.ErrNotFound, "repeated leave")
	st, err := is.Status(ctx, room, "bob", bob.WaitingToken)
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateNotFound, st.State)
	st, _ = is.Status(ctx, room, "carol", carol.WaitingToken)
	assert.EqualValues(t, 1, st.Position, "carol moved up")

	// Leaving an admission frees its capacity for the next tick.
	require.NoError(t, is.Leave(ctx, room, "alice", alice.WaitingToken))
	res, err := is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Admitted)
	st, _ = is.Status(ctx, room, "carol", carol.WaitingToken)
	assert.Equal(t, flashgate.StateActive, st.State)

	// bob may enter again, at the back.
	again, err := is.Enter(ctx, room, "bob")
	require.NoError(t, err)
	assert.NotEqual(t, bob.WaitingToken, again.WaitingToken)
}

func TestExpiryAndLazyCleanup(t *testing.T) {
	ctx := context.Background()
	is, clk, room, rdb := setup(t, issuer.RoomConfig{Capacity: 2, SessionDuration: 10 * time.Second})
	a, _ := is.Enter(ctx, room, "alice")
	require.Equal(t, flashgate.StateActive, a.State)
	assert.Equal(t, clk.Now().Add(10*time.Second), a.ExpiresAt)

	clk.Advance(10*time.Second - time.Millisecond)
	st, _ := is.Status(ctx, room, "alice", a.WaitingToken)
	assert.Equal(t, flashgate.StateActive, st.State, "1 ms before expiry")

	clk.Advance(time.Millisecond)
	st, _ = is.Status(ctx, room, "alice", a.WaitingToken)
	assert.Equal(t, flashgate.StateExpired, st.State, "expiry == now is expired")
	_, err := is.Exchange(ctx, room, "alice", a.WaitingToken)
	assert.ErrorIs(t, err, flashgate.ErrExpired)

	// The entry is still in the active ZSET until a tick drops it lazily.
	n, _ := rdb.ZCard(ctx, issuer.RoomKeys(room)[2]).Result()
	assert.EqualValues(t, 1, n)
	res, err := is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Expired)
	n, _ = rdb.ZCard(ctx, issuer.RoomKeys(room)[2]).Result()
	assert.EqualValues(t, 0, n)
	st, _ = is.Status(ctx, room, "alice", a.WaitingToken)
	assert.Equal(t, flashgate.StateExpired, st.State, "still EXPIRED after cleanup")

	// The user may queue again after expiry.
	again, err := is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateActive, again.State)
	assert.NotEqual(t, a.AdmissionID, again.AdmissionID)
	st, _ = is.Status(ctx, room, "alice", a.WaitingToken)
	assert.Equal(t, flashgate.StateExpired, st.State, "the old token stays EXPIRED")
}

func TestZombieIndexIsCleanedUp(t *testing.T) {
	ctx := context.Background()
	is, _, room, rdb := setup(t, issuer.RoomConfig{Capacity: 5})
	// A user index pointing at an admission that exists nowhere (e.g. a
	// half-applied manual cleanup): invariant 5.
	require.NoError(t, rdb.HSet(ctx, issuer.RoomKeys(room)[3], "zed", "77.3.1700000000000").Err())
	e, err := is.Enter(ctx, room, "zed")
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateActive, e.State)
	assert.NotEqual(t, "77.3.1700000000000", e.AdmissionID)
	st, err := is.Stats(ctx, room)
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.Zombies)
}

func TestPauseAndClose(t *testing.T) {
	ctx := context.Background()
	is, _, room, _ := setup(t, issuer.RoomConfig{Capacity: 5, State: issuer.RoomPaused})
	e, err := is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateWaiting, e.State, "paused: no fast track")
	assert.Equal(t, time.Duration(-1), e.EstimatedWait)
	res, _ := is.Tick(ctx, room)
	assert.Equal(t, 0, res.Admitted, "paused: no admissions")

	_, err = is.SetState(ctx, room, issuer.RoomOpen)
	require.NoError(t, err)
	res, _ = is.Tick(ctx, room)
	assert.Equal(t, 1, res.Admitted)

	_, err = is.SetState(ctx, room, issuer.RoomClosed)
	require.NoError(t, err)
	_, err = is.Enter(ctx, room, "bob")
	assert.ErrorIs(t, err, flashgate.ErrRoomClosed)
	st, err := is.Status(ctx, room, "alice", e.WaitingToken)
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateActive, st.State, "closing keeps existing admissions")
}

// The event window: before Opens an open room lines users up without
// admitting anyone (no fast track either); from Closes on it refuses new
// entries and admits nobody more, while an admission already made can still
// complete. Judged by the room's clock.
func TestEventWindow(t *testing.T) {
	ctx := context.Background()
	start := newClock().Now()
	is, clk, room, _ := setup(t, issuer.RoomConfig{Capacity: 5, RatePerMinute: 600,
		Opens: start.Add(10 * time.Second), Closes: start.Add(time.Minute)})

	cfg, err := is.Room(ctx, room)
	require.NoError(t, err)
	assert.True(t, cfg.Opens.Equal(start.Add(10*time.Second)), "Opens round-trips: %v", cfg.Opens)
	assert.True(t, cfg.Closes.Equal(start.Add(time.Minute)), "Closes round-trips: %v", cfg.Closes)
	assert.Equal(t, issuer.RoomOpen, cfg.State, "the configured state is kept")

	a, err := is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateWaiting, a.State, "before the window: no fast track")
	assert.Equal(t, issuer.RoomPaused, a.RoomState)
	res, err := is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, 0, res.Admitted, "before the window: no admissions")
	st, err := is.Stats(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, issuer.RoomPaused, st.State)
	assert.Equal(t, issuer.RoomOpen, st.Config.State)

	clk.Advance(10 * time.Second) // opens
	res, err = is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Admitted)
	b, err := is.Enter(ctx, room, "bob")
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateActive, b.State, "inside the window: fast track")
	assert.Equal(t, issuer.RoomOpen, b.RoomState)
	_, err = is.Enter(ctx, room, "carol")
	require.NoError(t, err)

	clk.Advance(50 * time.Second) // closes
	_, err = is.Enter(ctx, room, "dave")
	assert.ErrorIs(t, err, flashgate.ErrRoomClosed, "after the window: new entries refused")
	res, err = is.Tick(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, 0, res.Admitted, "after the window: nobody more admitted")
	st, err = is.Stats(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, issuer.RoomClosed, st.State)
	s, err := is.Status(ctx, room, "bob", b.WaitingToken)
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateActive, s.State, "admissions made keep running")
	adm, err := is.Exchange(ctx, room, "bob", b.WaitingToken)
	require.NoError(t, err)
	_, err = is.Complete(ctx, room, "bob", adm.ID)
	require.NoError(t, err, "an admission made inside the window completes after it")

	// Validation.
	for _, c := range []issuer.RoomConfig{
		{Opens: start, Closes: start},
		{Opens: start, Closes: start.Add(-time.Second)},
		{Opens: time.Unix(-5, 0)},
	} {
		_, err := is.SetRoom(ctx, room, c)
		assert.ErrorIs(t, err, flashgate.ErrInvalidInput, "%+v", c)
	}
}

func TestExchangeMintsStableTokens(t *testing.T) {
	ctx := context.Background()
	is, clk, room, _ := setup(t, issuer.RoomConfig{Capacity: 1, SessionDuration: time.Minute})
	a, _ := is.Enter(ctx, room, "alice")
	b, _ := is.Enter(ctx, room, "bob")
	_, err := is.Exchange(ctx, room, "bob", b.WaitingToken)
	assert.ErrorIs(t, err, flashgate.ErrNotAdmitted)

	adm, err := is.Exchange(ctx, room, "alice", a.WaitingToken)
	require.NoError(t, err)
	clk.Advance(5 * time.Second)
	adm2, err := is.Exchange(ctx, room, "alice", a.WaitingToken)
	require.NoError(t, err)
	assert.Equal(t, adm.Token, adm2.Token, "re-minting gives the same token")
	assert.Equal(t, a.ExpiresAt.Unix(), adm.ExpiresAt.Unix(), "exp = the active entry's expiry")

	keys := verifier.NewStaticKeys(map[string]ed25519.PublicKey{"k1": newSigner().priv.Public().(ed25519.PublicKey)})
	v, err := verifier.New(keys, verifier.Config{Issuer: "https://issuer.test", Audience: "orders", Now: clk.Now})
	require.NoError(t, err)
	tok, err := v.Verify(ctx, adm.Token, verifier.Expect{Product: room, User: "alice"})
	require.NoError(t, err)
	assert.Equal(t, adm.ID, tok.ID)
	assert.Equal(t, time.Minute, tok.ExpiresAt.Sub(tok.IssuedAt))

	var claims map[string]any
	payload, _ := base64.RawURLEncoding.DecodeString(strings.Split(adm.Token, ".")[1])
	require.NoError(t, json.Unmarshal(payload, &claims))
	assert.Equal(t, room, claims["product"])
}

func TestCompletion(t *testing.T) {
	ctx := context.Background()
	is, clk, room, _ := setup(t, issuer.RoomConfig{Capacity: 10, SessionDuration: time.Minute})
	enterAdmitted := func(user string) *issuer.Entry {
		e, err := is.Enter(ctx, room, user)
		require.NoError(t, err)
		require.Equal(t, flashgate.StateActive, e.State)
		return e
	}

	a := enterAdmitted("alice")
	c, err := is.Complete(ctx, room, "alice", a.AdmissionID)
	require.NoError(t, err)
	assert.False(t, c.Repeated)
	clk.Advance(time.Second)
	c2, err := is.Complete(ctx, room, "alice", a.AdmissionID)
	require.NoError(t, err, "a repeated completion returns the first result")
	assert.True(t, c2.Repeated)
	assert.Equal(t, c.CompletedAt, c2.CompletedAt)
	st, _ := is.Status(ctx, room, "alice", a.WaitingToken)
	assert.Equal(t, flashgate.StateCompleted, st.State)
	_, err = is.Exchange(ctx, room, "alice", a.WaitingToken)
	assert.ErrorIs(t, err, flashgate.ErrCompleted, "no token for a completed admission")

	// After completion the user may queue (and buy) again; the old admission stays consumed.
	a2 := enterAdmitted("alice")
	assert.NotEqual(t, a.AdmissionID, a2.AdmissionID)
	st, _ = is.Status(ctx, room, "alice", a.WaitingToken)
	assert.Equal(t, flashgate.StateCompleted, st.State, "the old token still reports its own entry")
	assert.NotEqual(t, a2.AdmissionID, st.AdmissionID, "never the new admission's id")
	_, err = is.Complete(ctx, room, "alice", a2.AdmissionID)
	require.NoError(t, err)

	// Completion after expiry.
	b := enterAdmitted("bob")
	clk.Advance(time.Minute)
	_, err = is.Complete(ctx, room, "bob", b.AdmissionID)
	assert.ErrorIs(t, err, flashgate.ErrExpired)
	_, err = is.Complete(ctx, room, "bob", b.AdmissionID)
	assert.ErrorIs(t, err, flashgate.ErrExpired, "and stays refused")

	// Completion after revocation.
	d := enterAdmitted("dave")
	r, err := is.Revoke(ctx, room, "", d.AdmissionID)
	require.NoError(t, err)
	assert.Equal(t, d.AdmissionID, r.AdmissionID)
	r2, err := is.Revoke(ctx, room, "", d.AdmissionID)
	require.NoError(t, err)
	assert.True(t, r2.Repeated)
	_, err = is.Complete(ctx, room, "dave", d.AdmissionID)
	assert.ErrorIs(t, err, flashgate.ErrRevoked)
	st, _ = is.Status(ctx, room, "dave", d.WaitingToken)
	assert.Equal(t, flashgate.StateRevoked, st.State)

	// Revoke by user; the index is cleared so the user may queue again.
	e := enterAdmitted("erin")
	_, err = is.Revoke(ctx, room, "erin", "")
	require.NoError(t, err)
	_, err = is.Complete(ctx, room, "erin", e.AdmissionID)
	assert.ErrorIs(t, err, flashgate.ErrRevoked)
	_, err = is.Revoke(ctx, room, "erin", "")
	assert.ErrorIs(t, err, flashgate.ErrNotFound)

	// Unknown ids, a token of another user, and revoking a completed admission.
	_, err = is.Complete(ctx, room, "alice", "999.1.1") // no epoch: not an admission id
	assert.ErrorIs(t, err, flashgate.ErrNotFound)
	_, err = is.Complete(ctx, room, "alice", "zz.999.1.1") // an epoch of another time
	assert.ErrorIs(t, err, flashgate.ErrNotFound)
	_, err = is.Complete(ctx, room, "alice", e.AdmissionID[:strings.IndexByte(e.AdmissionID, '.')]+".999.1.1")
	assert.ErrorIs(t, err, flashgate.ErrNotFound)
	_, err = is.Complete(ctx, room, "alice", "not-a-jti")
	assert.ErrorIs(t, err, flashgate.ErrNotFound)
	f := enterAdmitted("frank")
	_, err = is.Complete(ctx, room, "gina", f.AdmissionID)
	assert.ErrorIs(t, err, flashgate.ErrOwnerMismatch)
	_, err = is.Revoke(ctx, room, "", a.AdmissionID)
	assert.ErrorIs(t, err, flashgate.ErrCompleted)

	st2, err := is.Stats(ctx, room)
	require.NoError(t, err)
	assert.EqualValues(t, 2, st2.Completed)
	assert.EqualValues(t, 2, st2.Revoked)
}

func TestCheckActive(t *testing.T) {
	ctx := context.Background()
	is, clk, room, _ := setup(t, issuer.RoomConfig{Capacity: 10, SessionDuration: time.Minute})
	a, _ := is.Enter(ctx, room, "alice")
	require.NoError(t, is.CheckActive(ctx, room, a.AdmissionID))
	_, err := is.Revoke(ctx, room, "", a.AdmissionID)
	require.NoError(t, err)
	assert.ErrorIs(t, is.CheckActive(ctx, room, a.AdmissionID), flashgate.ErrNotFound)

	b, _ := is.Enter(ctx, room, "bob")
	clk.Advance(time.Minute)
	assert.ErrorIs(t, is.CheckActive(ctx, room, b.AdmissionID), flashgate.ErrExpired)
}

func TestDefaultRoomPolicy(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	is, err := issuer.New(issuer.Config{Redis: rdb, WaitingSecret: secret,
		DefaultRoom: &issuer.RoomConfig{Capacity: 3}})
	require.NoError(t, err)
	room := redistest.Room("auto")
	e, err := is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	assert.True(t, e.Created)
	cfg, err := is.Room(ctx, room)
	require.NoError(t, err)
	assert.Equal(t, 3, cfg.Capacity)
	assert.Equal(t, issuer.DefaultRatePerMinute, cfg.RatePerMinute)
	rooms, err := is.Rooms(ctx)
	require.NoError(t, err)
	assert.Contains(t, rooms, room)
}

func TestRoomConfigValidation(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	is := newIssuer(t, rdb, nil)
	for _, c := range []issuer.RoomConfig{
		{Capacity: -1}, {RatePerMinute: -5}, {SessionDuration: 1500 * time.Millisecond}, {SessionDuration: time.Hour},
		{Tick: time.Millisecond}, {TickBatch: 20000}, {State: "sleepy"},
	} {
		_, err := is.SetRoom(ctx, redistest.Room("bad"), c)
		assert.ErrorIs(t, err, flashgate.ErrInvalidInput, "%+v", c)
	}
}

// TestInvariantsUnderConcurrency runs three issuer replicas ticking one room
// while thousands of users enter (one of them 100 times at once) and a
// consumer completes admissions, then checks invariants 1-3 (docs/concepts.md#invariants) from
// the admissions themselves.
func TestInvariantsUnderConcurrency(t *testing.T) {
	t.Run("rate binds", func(t *testing.T) {
		invariantRun(t, redistest.Start(t).Client(t), redistest.Room("surge"), 1500, 300, 30*time.Second, 10, "rate")
	})
	t.Run("capacity binds", func(t *testing.T) {
		invariantRun(t, redistest.Start(t).Client(t), redistest.Room("surge"), 1000, 3000, 5*time.Second, 1, "capacity")
	})
	// Every third admission is never claimed and ends at the 2 s arrival
	// window; the others are claimed by an exchange (unless they lapsed
	// first) and completed.
	t.Run("arrival window", func(t *testing.T) {
		invariantRun(t, redistest.Start(t).Client(t), redistest.Room("surge"), 1000, 3000, 5*time.Second, 3, "capacity",
			2*time.Second)
	})
}

// peakLive recounts the most admissions live at once from their spans
// [admitted, ended) in ms; at the same millisecond an end comes before a
// start (the slot is freed, then taken).
func peakLive(spans [][2]int64) int {
	type ev struct{ t, d int64 }
	evs := make([]ev, 0, 2*len(spans))
	for _, s := range spans {
		evs = append(evs, ev{s[0], +1}, ev{s[1], -1})
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].t != evs[j].t {
			return evs[i].t < evs[j].t
		}
		return evs[i].d < evs[j].d
	})
	live, peak := 0, 0
	for _, e := range evs {
		live += int(e.d)
		peak = max(peak, live)
	}
	return peak
}

// maxPerMinute is the most admission times (ms) in any 60 s window
// [t, t+60 s): what the rate invariant bounds.
func maxPerMinute(ats []int64) int {
	ats = slices.Clone(ats)
	slices.Sort(ats)
	most := 0
	for i, j := 0, 0; i < len(ats); i++ {
		for ats[i]-ats[j] >= 60_000 {
			j++
		}
		most = max(most, i-j+1)
	}
	return most
}

// runSale ticks room from every replica (each a millisecond after its
// last tick) while clk runs 50× fast (100 ms every 2 ms), until the
// returned stop is called; stop returns once they have ended.
func runSale(t *testing.T, reps []*issuer.Issuer, room string, clk *testkit.Clock) (stop func()) {
	ctx := context.Background()
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, r := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				_, err := r.Tick(ctx, room)
				assert.NoError(t, err)
				time.Sleep(time.Millisecond)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
				clk.Advance(100 * time.Millisecond)
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// invariantRun completes admissions whose admission number is not a
// multiple of keepEvery (keepEvery 1: none) and lets the others expire. With
// an arrival window (window[0]) the completed ones are first claimed by an
// exchange, and the others, never claimed, end at the window.
func invariantRun(t *testing.T, rdb redis.UniversalClient, room string, users, rate int, session time.Duration, keepEvery int64, binding string, window ...time.Duration) {
	var arrival time.Duration // 0: the room's default (no effect: not shorter than these sessions)
	if len(window) > 0 {
		arrival = window[0]
	}
	var tokens sync.Map // user → waiting token, for the exchanges
	const capacity = 25
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk := newClock()
	replicas := []*issuer.Issuer{newIssuer(t, rdb, clk), newIssuer(t, rdb, clk), newIssuer(t, rdb, clk)}
	_, err := replicas[0].SetRoom(ctx, room, issuer.RoomConfig{Capacity: capacity, RatePerMinute: rate,
		SessionDuration: session, Tick: 200 * time.Millisecond, TickBatch: 50, ArrivalWindow: arrival})
	require.NoError(t, err)

	// Enters: users in parallel across replicas; "hot" enters 100 times at once.
	var wg sync.WaitGroup
	hotTokens := make([]string, 100)
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := replicas[i%3].Enter(ctx, room, "hot")
			if assert.NoError(t, err) {
				hotTokens[i] = e.WaitingToken
			}
		}()
	}
	sem := make(chan struct{}, 64)
	for i := range users - 1 {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			e, err := replicas[i%3].Enter(ctx, room, "u"+strconv.Itoa(i))
			if assert.NoError(t, err) {
				tokens.Store(e.User, e.WaitingToken)
			}
		}()
	}

	// Ticks from three replicas while the clock runs 50× fast; a consumer
	// completes 90 % of the admissions and lets the rest expire.
	type adm struct {
		seq, admno, at int64
		user           string
		end            int64
		claimed        bool
	}
	var mu sync.Mutex
	seen := map[string]*adm{}
	stopSale := runSale(t, replicas, room, clk)
	consume := func() int {
		m, err := rdb.HGetAll(ctx, issuer.RoomKeys(room)[3]).Result()
		require.NoError(t, err)
		for user, jti := range m {
			mu.Lock()
			a, ok := seen[jti]
			if !ok {
				id, ok := flashgate.ParseAdmissionID(jti)
				require.True(t, ok, jti)
				a = &adm{seq: id.Arrival, admno: id.Number, at: id.AdmittedAt.UnixMilli(), user: user}
				seen[jti] = a
			}
			mu.Unlock()
			if a.end == 0 && keepEvery > 1 && a.admno%keepEvery != 0 {
				if tok, ok := tokens.Load(user); ok && arrival > 0 {
					if _, err := replicas[int(a.admno+1)%3].Exchange(ctx, room, user, tok.(string)); err != nil {
						continue // lapsed already (the clock runs 50× fast): the window ended it
					}
					a.claimed = true
				}
				c, err := replicas[int(a.admno)%3].Complete(ctx, room, user, jti)
				if err == nil {
					a.end = c.CompletedAt.UnixMilli()
				}
			}
		}
		return len(m)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		consume()
		st, err := replicas[0].Stats(ctx, room)
		require.NoError(t, err)
		if st.Admitted == int64(users) || time.Now().After(deadline) {
			break
		}
		time.Sleep(3 * time.Millisecond)
	}
	wg.Wait()
	stopSale()
	consume()

	// Invariant 1: one entry per user; the hot user got one token.
	for _, tok := range hotTokens {
		assert.Equal(t, hotTokens[0], tok)
	}
	st, err := replicas[0].Stats(ctx, room)
	require.NoError(t, err)
	assert.EqualValues(t, users, st.Entered, "entered counts distinct users")
	assert.EqualValues(t, users, st.Admitted, "every user admitted exactly once (stats: %+v)", st)
	require.Len(t, seen, users, "admissions observed")
	byUser := map[string]bool{}
	list := make([]*adm, 0, len(seen))
	for _, a := range seen {
		assert.False(t, byUser[a.user], "user %s admitted twice", a.user)
		byUser[a.user] = true
		list = append(list, a)
	}

	// Invariant 2: admission order equals arrival order.
	sort.Slice(list, func(i, j int) bool { return list[i].seq < list[j].seq })
	for i := 1; i < len(list); i++ {
		assert.Less(t, list[i-1].admno, list[i].admno, "FIFO: arrival %d admitted after arrival %d", list[i-1].seq, list[i].seq)
	}

	// Invariant 3: live admissions never exceed capacity (the scripts' own
	// peak, and a recount from the admissions' intervals), and no 60 s window
	// holds more than the rate.
	assert.LessOrEqual(t, st.PeakActive, int64(capacity))
	if binding == "capacity" {
		assert.Equal(t, int64(capacity), st.PeakActive, "the surge should fill capacity")
	}
	var spans [][2]int64
	for _, a := range list {
		end := a.at + session.Milliseconds()
		if arrival > 0 && !a.claimed {
			end = a.at + arrival.Milliseconds() // never claimed: the window ends it (the tick frees it then or later)
		}
		if a.end != 0 && a.end < end {
			end = a.end
		}
		spans = append(spans, [2]int64{a.at, end})
	}
	peak := peakLive(spans)
	assert.LessOrEqual(t, peak, capacity, "recounted peak")
	ats := make([]int64, 0, len(list))
	for _, a := range list {
		ats = append(ats, a.at)
	}
	maxWin := maxPerMinute(ats)
	assert.LessOrEqual(t, maxWin, rate, "admissions in a 60 s window")
	if binding == "rate" {
		assert.GreaterOrEqual(t, maxWin, rate*9/10, "the rate should be the binding limit in some window")
	}
	if arrival > 0 {
		assert.Positive(t, st.NotClaimed, "unclaimed admissions ended at the window")
	}
	t.Logf("admitted %d, peak live %d/%d, max per minute %d/%d, completed %d, expired %d (not claimed %d)",
		st.Admitted, peak, capacity, maxWin, rate, st.Completed, st.Expired, st.NotClaimed)
}

func ExampleIssuer_Enter() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: exampleRedis})
	defer rdb.Close()
	is, _ := issuer.New(issuer.Config{Redis: rdb, WaitingSecret: secret})
	room := redistest.Room("example")
	_, _ = is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 1, RatePerMinute: 60})

	first, _ := is.Enter(ctx, room, "alice")
	second, _ := is.Enter(ctx, room, "bob")
	// bob is first in line; with no history yet, the estimate is the configured pace: one admission at 60/min.
	fmt.Println(first.State, second.State, second.Position, second.EstimatedWait.Round(time.Second))
	// Output: ACTIVE WAITING 1 1s
}
