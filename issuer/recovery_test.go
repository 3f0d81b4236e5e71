package issuer_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/logtest"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
)

// admittedEntry enters user into an open room with free capacity (fast track).
func admittedEntry(t *testing.T, is *issuer.Issuer, room, user string) *issuer.Entry {
	t.Helper()
	e, err := is.Enter(context.Background(), room, user)
	require.NoError(t, err)
	require.Equal(t, flashgate.StateActive, e.State, "%s fast-tracked", user)
	return e
}

// Invariant 6: after Redis loses its data, arrival and admission numbers
// restart at 1. An admission id and a waiting token minted before the loss
// must never read as the new buyer's entry that has the same numbers: the
// old admission is refused at completion (not "COMPLETED, repeated"), and
// the old waiting token reads NOT_FOUND (not the new buyer's state).
func TestDataLossOldIDsNeverReadAsNewBuyers(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	clk := newClock()
	is := newIssuer(t, rdb, clk)
	room := redistest.Room("loss")
	cfg := issuer.RoomConfig{Capacity: 10, RatePerMinute: 600, SessionDuration: time.Minute}
	_, err := is.SetRoom(ctx, room, cfg)
	require.NoError(t, err)

	// alice is admitted (arrival 1, admission 1) and completes her order.
	alice := admittedEntry(t, is, room, "alice")
	_, err = is.Complete(ctx, room, "alice", alice.AdmissionID)
	require.NoError(t, err)
	// carol is admitted (arrival 2, admission 2) and still holds her token.
	carol := admittedEntry(t, is, room, "carol")

	// Redis dies without persistence and comes back empty.
	srv.Kill()
	require.NoError(t, srv.Restart())

	// The operator (or a replica) recreates the room; new buyers bob and dan
	// get arrival and admission numbers 1 and 2 again; bob completes.
	_, err = is.SetRoom(ctx, room, cfg)
	require.NoError(t, err)
	clk.Advance(time.Second) // same or later room clock; not needed for the property
	bob := admittedEntry(t, is, room, "bob")
	dan := admittedEntry(t, is, room, "dan")
	require.Equal(t, alice.Arrival, bob.Arrival, "the numbers restarted")
	require.Equal(t, alice.AdmissionNumber, bob.AdmissionNumber)
	require.Equal(t, carol.Arrival, dan.Arrival)
	require.NotEqual(t, alice.AdmissionID, bob.AdmissionID, "the epoch tells the ids apart")
	_, err = is.Complete(ctx, room, "bob", bob.AdmissionID)
	require.NoError(t, err)

	// alice's old admission: refused, never "COMPLETED, repeated" with bob's time.
	c, err := is.Complete(ctx, room, "alice", alice.AdmissionID)
	assert.ErrorIs(t, err, flashgate.ErrNotFound, "old admission completed: %+v", c)
	assert.Contains(t, err.Error(), "earlier epoch")
	// carol's old admission: refused, and it does not consume dan's.
	_, err = is.Complete(ctx, room, "carol", carol.AdmissionID)
	assert.ErrorIs(t, err, flashgate.ErrNotFound)
	_, err = is.Revoke(ctx, room, "", carol.AdmissionID)
	assert.ErrorIs(t, err, flashgate.ErrNotFound)
	d, err := is.Complete(ctx, room, "dan", dan.AdmissionID)
	require.NoError(t, err)
	assert.False(t, d.Repeated)

	// The old waiting tokens read NOT_FOUND (the client enters again), not
	// COMPLETED or ACTIVE from bob's and dan's entries.
	for _, old := range []*issuer.Entry{alice, carol} {
		st, err := is.Status(ctx, room, old.User, old.WaitingToken)
		require.NoError(t, err)
		assert.Equal(t, flashgate.StateNotFound, st.State, "%s's old token", old.User)
		_, err = is.Exchange(ctx, room, old.User, old.WaitingToken)
		assert.ErrorIs(t, err, flashgate.ErrNotFound)
		assert.ErrorIs(t, is.Leave(ctx, room, old.User, old.WaitingToken), flashgate.ErrNotFound)
	}
	// Entering again gives carol a place of the new epoch.
	again := admittedEntry(t, is, room, "carol")
	assert.NotEqual(t, carol.WaitingToken, again.WaitingToken)
	st, err := is.Status(ctx, room, "carol", again.WaitingToken)
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateActive, st.State)
}

// The status snapshot answers waiting users far behind the head without a
// script. After a data loss the line refills with the same arrival numbers;
// a token from before must read NOT_FOUND at once, not an interpolated
// WAITING place in the new line.
func TestDataLossSnapshotAnswersNotFound(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	room := redistest.Room("snaploss")
	cfg := issuer.RoomConfig{Capacity: 1, RatePerMinute: 60, State: issuer.RoomPaused}
	snap := func(c *issuer.Config) { c.StatusSnapshot = issuer.SuggestedStatusSnapshot }
	a := newIssuer(t, rdb, nil, snap)
	_, err := a.SetRoom(ctx, room, cfg)
	require.NoError(t, err)
	const n = 400
	old := make([]*issuer.Entry, n)
	for i := range old {
		old[i], err = a.Enter(ctx, room, "u"+strconv.Itoa(i))
		require.NoError(t, err)
	}
	far := old[n-10] // far behind the head: answered from the snapshot
	st, err := a.Status(ctx, room, far.User, far.WaitingToken)
	require.NoError(t, err)
	require.True(t, st.PositionEstimated, "the snapshot answers before the loss")

	require.NoError(t, rdb.FlushAll(ctx).Err())
	_, err = a.SetRoom(ctx, room, cfg)
	require.NoError(t, err)
	for i := range n { // other users refill the line: arrival numbers 1…n again
		_, err = a.Enter(ctx, room, "v"+strconv.Itoa(i))
		require.NoError(t, err)
	}
	// A replica with a fresh snapshot, and this one once its snapshot aged.
	b := newIssuer(t, rdb, nil, snap)
	time.Sleep(issuer.SuggestedStatusSnapshot + 50*time.Millisecond)
	for name, is := range map[string]*issuer.Issuer{"fresh replica": b, "same replica": a} {
		st, err := is.Status(ctx, room, far.User, far.WaitingToken)
		require.NoError(t, err, name)
		assert.Equal(t, flashgate.StateNotFound, st.State, "%s: old token read %+v", name, st)
		assert.False(t, st.PositionEstimated, name)
	}
}

// A room configured through the admin API (SetRoom) and lost with Redis's
// data is restored from a replica's last known config — by an enter, and
// by the tick loop — with a new epoch, logged and counted; a waiting token
// of the lost room reads NOT_FOUND meanwhile, not 404 unknown_room.
func TestLostRoomRestoredFromLastKnownConfig(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	logs, log := logtest.New()
	withLog := func(c *issuer.Config) { c.Logger = log }
	room := redistest.Room("restore")
	cfg := issuer.RoomConfig{Capacity: 7, RatePerMinute: 123, SessionDuration: 90 * time.Second, Tick: 250 * time.Millisecond,
		TickBatch: 11, State: issuer.RoomOpen, Closes: time.Now().Add(time.Hour).Truncate(time.Millisecond),
		ArrivalWindow: 17 * time.Second}

	t.Run("by enter", func(t *testing.T) {
		a := newIssuer(t, rdb, nil, withLog) // no default policy: unknown rooms are refused
		_, err := a.SetRoom(ctx, room, cfg)
		require.NoError(t, err)
		before, err := a.Stats(ctx, room)
		require.NoError(t, err)
		alice := admittedEntry(t, a, room, "alice")

		srv.Kill()
		require.NoError(t, srv.Restart())

		st, err := a.Status(ctx, room, "alice", alice.WaitingToken)
		require.NoError(t, err, "a lost room this replica knew reads NOT_FOUND, not unknown_room")
		assert.Equal(t, flashgate.StateNotFound, st.State)
		assert.Equal(t, alice.Arrival, st.Arrival)

		e, err := a.Enter(ctx, room, "alice")
		require.NoError(t, err, "the enter restores the room")
		assert.Equal(t, flashgate.StateActive, e.State)
		got, err := a.Room(ctx, room)
		require.NoError(t, err)
		assert.True(t, cfg.WithDefaults().Closes.Equal(got.Closes))
		got.Closes = cfg.Closes
		assert.Equal(t, cfg.WithDefaults(), got, "restored with the last known config, not defaults")
		after, err := a.Stats(ctx, room)
		require.NoError(t, err)
		assert.NotEqual(t, before.Epoch, after.Epoch, "a restored room starts a new epoch")
		assert.EqualValues(t, 1, a.Observe().RoomsRestored)
		assert.Equal(t, 1, logs.Count("waiting room restored"), "logged: %q", logs.Lines())
		rooms, err := a.Rooms(ctx)
		require.NoError(t, err)
		assert.Contains(t, rooms, room, "registered with the tick loops again")
	})

	t.Run("by the tick loop", func(t *testing.T) {
		b := newIssuer(t, rdb, nil, withLog)
		_, err := b.Tick(ctx, room) // a replica learns the config from its ticks
		require.NoError(t, err)
		require.NoError(t, rdb.FlushAll(ctx).Err())

		defer runUntilRestored(t, b)()
		require.EqualValues(t, 1, b.Observe().RoomsRestored, "Run restores a room fg:rooms no longer lists")
		got, err := b.Room(ctx, room)
		require.NoError(t, err)
		assert.Equal(t, 7, got.Capacity)
		assert.Equal(t, 123, got.RatePerMinute)
		assert.Equal(t, 17*time.Second, got.ArrivalWindow, "the arrival window is part of the restored policy")
		rooms, err := b.Rooms(ctx)
		require.NoError(t, err)
		assert.Contains(t, rooms, room)
	})
}

// With the secret shared through Redis, a replica that starts after a data
// loss creates a new secret while running replicas hold the old one. They
// converge on one (SyncSecret), tokens minted under either still verify on
// a replica that held it, and a token keyed by a secret a replica never held
// reads NOT_FOUND — never token_owner_mismatch.
func TestSharedSecretConvergesAfterDataLoss(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	room := redistest.Room("secret")
	shared := func(t *testing.T) *issuer.Issuer {
		s, err := issuer.LoadOrCreateSecret(ctx, rdb)
		require.NoError(t, err)
		return newIssuer(t, rdb, nil, func(c *issuer.Config) {
			c.WaitingSecret, c.SharedSecret = s, true
			c.DefaultRoom = &issuer.RoomConfig{State: issuer.RoomPaused}
		})
	}
	a := shared(t)
	alice, err := a.Enter(ctx, room, "alice")
	require.NoError(t, err)

	require.NoError(t, rdb.FlushAll(ctx).Err())
	c := shared(t) // starts after the loss: a new secret
	bob, err := c.Enter(ctx, room, "bob")
	require.NoError(t, err)

	// On c, alice's token is keyed by a secret c never held: NOT_FOUND.
	st, err := c.Status(ctx, room, "alice", alice.WaitingToken)
	require.NoError(t, err, "not token_owner_mismatch")
	assert.Equal(t, flashgate.StateNotFound, st.State)
	assert.Equal(t, alice.Arrival, st.Arrival, "NOT_FOUND names the token's entry, as the status script does")
	_, err = c.Exchange(ctx, room, "alice", alice.WaitingToken)
	assert.ErrorIs(t, err, flashgate.ErrNotFound)

	// a adopts the secret in Redis; bob's token (c's secret) now verifies on a.
	require.NoError(t, a.SyncSecret(ctx))
	st, err = a.Status(ctx, room, "bob", bob.WaitingToken)
	require.NoError(t, err)
	assert.Equal(t, flashgate.StateWaiting, st.State)
	// Both mint with the same secret now: the same entry gets the same token.
	ea, err := a.Enter(ctx, room, "carol")
	require.NoError(t, err)
	ec, err := c.Enter(ctx, room, "carol")
	require.NoError(t, err)
	assert.Equal(t, ea.WaitingToken, ec.WaitingToken, "converged on one secret")
	// Another user's token is still refused as someone else's.
	_, err = a.Status(ctx, room, "bob", ec.WaitingToken)
	assert.ErrorIs(t, err, flashgate.ErrOwnerMismatch)

	// A lost key is put back by a running replica (SETNX), not left for the
	// next replica to start to invent.
	require.NoError(t, rdb.Del(ctx, "fg:waiting-secret").Err())
	require.NoError(t, c.SyncSecret(ctx))
	d := shared(t)
	ed, err := d.Enter(ctx, room, "carol")
	require.NoError(t, err)
	assert.Equal(t, ec.WaitingToken, ed.WaitingToken, "the new replica uses the running replicas' secret")
	assert.True(t, strings.HasPrefix(ed.WaitingToken, "fgw2_"))

	// With a replica's Run loop going, a replica that starts right after a
	// loss waits out SecretGrace and takes the secret Run put back, instead
	// of inventing a second one.
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	require.NoError(t, rdb.FlushAll(ctx).Err())
	e := shared(t)
	ee, err := e.Enter(ctx, room, "carol")
	require.NoError(t, err)
	ed, err = d.Enter(ctx, room, "carol")
	require.NoError(t, err)
	assert.Equal(t, ed.WaitingToken, ee.WaitingToken, "one secret after the loss, with no sync by hand")
}

// runUntilRestored runs b's tick loop until it has restored a room (at most
// 10 s) and returns the function that stops the loop.
func runUntilRestored(t *testing.T, b *issuer.Issuer) (stop func()) {
	t.Helper()
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(runCtx) }()
	deadline := time.Now().Add(10 * time.Second)
	for b.Observe().RoomsRestored == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	return func() { cancel(); <-done }
}
