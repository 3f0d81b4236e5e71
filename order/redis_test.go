package order_test

import (
	"context"
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
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/order"
	"github.com/flashgate/flashgate/verifier"
)

func TestCompleteAndCheckActive(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	is, room := issuerRoom(t, rdb)
	a, err := is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	b, err := is.Enter(ctx, room, "bob")
	require.NoError(t, err)

	chk, err := order.NewRedis(rdb, nil)
	require.NoError(t, err)
	ta := &verifier.Token{Product: room, User: "alice", ID: a.AdmissionID}
	tb := &verifier.Token{Product: room, User: "bob", ID: b.AdmissionID}

	require.NoError(t, chk.CheckActive(ctx, ta))
	c, err := chk.Complete(ctx, ta)
	require.NoError(t, err)
	assert.False(t, c.Repeated)
	c2, err := chk.Complete(ctx, ta)
	require.NoError(t, err)
	assert.True(t, c2.Repeated, "a retried completion returns the first result")
	assert.ErrorIs(t, chk.CheckActive(ctx, ta), flashgate.ErrNotFound, "completed: no longer active")

	_, err = is.Revoke(ctx, room, "", b.AdmissionID)
	require.NoError(t, err)
	assert.ErrorIs(t, chk.CheckActive(ctx, tb), flashgate.ErrNotFound)
	_, err = chk.Complete(ctx, tb)
	assert.ErrorIs(t, err, flashgate.ErrRevoked)
}

func TestRedisAwayFailsClosed(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	chk, err := order.NewRedis(rdb, nil)
	require.NoError(t, err)
	srv.Kill()
	tok := &verifier.Token{Product: "sku", User: "alice", ID: "e0.1.1.1"}
	_, err = chk.Complete(context.Background(), tok)
	assert.ErrorIs(t, err, flashgate.ErrUnavailable)
	assert.ErrorIs(t, chk.CheckActive(context.Background(), tok), flashgate.ErrUnavailable)
}

func TestCompletionReplicas(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	is, room := issuerRoom(t, rdb)
	a, err := is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	tok := &verifier.Token{Product: room, User: "alice", ID: a.AdmissionID}

	// No replica: the completion is applied but not acknowledged → fail closed.
	chk, err := order.NewRedis(rdb, &order.Config{CompletionReplicas: 1, CompletionTimeout: 50 * time.Millisecond})
	require.NoError(t, err)
	_, err = chk.Complete(ctx, tok)
	assert.ErrorIs(t, err, flashgate.ErrUnavailable)
	assert.Contains(t, err.Error(), "0 of 1 replicas")

	// With a replica attached, the retry returns the first result.
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(srv.Port))
	require.Eventually(t, func() bool {
		info, _ := rdb.Info(ctx, "replication").Result()
		return strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online")
	}, 10*time.Second, 50*time.Millisecond, "replica %s attached", replica.Addr)
	chk, err = order.NewRedis(rdb, &order.Config{CompletionReplicas: 1, CompletionTimeout: 2 * time.Second})
	require.NoError(t, err)
	c, err := chk.Complete(ctx, tok)
	require.NoError(t, err)
	assert.True(t, c.Repeated)

	_, err = order.NewRedis(redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr}}),
		&order.Config{CompletionReplicas: 1})
	assert.ErrorIs(t, err, flashgate.ErrInvalidInput, "WAIT is per node: not on Cluster")
}

// issuerRoom returns an issuer on rdb and a fresh room with capacity 5.
func issuerRoom(t *testing.T, rdb *redis.Client) (*issuer.Issuer, string) {
	t.Helper()
	is, err := issuer.New(issuer.Config{Redis: rdb, WaitingSecret: make([]byte, 32)})
	require.NoError(t, err)
	room := redistest.Room("sku")
	_, err = is.SetRoom(context.Background(), room, issuer.RoomConfig{Capacity: 5})
	require.NoError(t, err)
	return is, room
}

// The active check judges expiry by the room's clock (the latest time a
// script of the room wrote), never by this pod's: a room whose clock runs an
// hour ahead of the pod has expired an admission the pod's clock would still
// call live.
func TestCheckActiveUsesTheRoomClock(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	var mu sync.Mutex
	roomNow := time.Now().Add(time.Hour)
	is, err := issuer.New(issuer.Config{Redis: rdb, WaitingSecret: make([]byte, 32),
		Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return roomNow }})
	require.NoError(t, err)
	room := redistest.Room("clock")
	_, err = is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 5, SessionDuration: time.Minute})
	require.NoError(t, err)
	a, err := is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	chk, err := order.NewRedis(rdb, nil) // Redis TIME: an hour behind the room
	require.NoError(t, err)
	tok := &verifier.Token{Product: room, User: "alice", ID: a.AdmissionID}
	require.NoError(t, chk.CheckActive(ctx, tok))

	mu.Lock()
	roomNow = roomNow.Add(2 * time.Minute)
	mu.Unlock()
	_, err = is.Enter(ctx, room, "bob") // a write: the room's clock moves on
	require.NoError(t, err)
	require.True(t, a.ExpiresAt.After(time.Now()), "by the pod's clock the admission is live")
	assert.ErrorIs(t, chk.CheckActive(ctx, tok), flashgate.ErrExpired, "by the room's clock it lapsed")
}

// issuer.Admissions (what NewRedis is built on) answers as the Issuer does:
// a completion through either is the same completion, seen as Repeated by
// the other, and both then call the admission gone.
func TestAdmissionsCompleteLikeTheIssuer(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	is, room := issuerRoom(t, rdb)
	a, err := is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	b, err := is.Enter(ctx, room, "bob")
	require.NoError(t, err)

	adm, err := issuer.NewAdmissions(rdb, issuer.AdmissionsConfig{})
	require.NoError(t, err)

	require.NoError(t, adm.CheckActive(ctx, room, a.AdmissionID))
	first, err := adm.Complete(ctx, room, "alice", a.AdmissionID)
	require.NoError(t, err)
	assert.False(t, first.Repeated)
	again, err := is.Complete(ctx, room, "alice", a.AdmissionID)
	require.NoError(t, err)
	assert.True(t, again.Repeated, "the Issuer sees the Admissions' completion")
	assert.True(t, first.CompletedAt.Equal(again.CompletedAt))

	first, err = is.Complete(ctx, room, "bob", b.AdmissionID)
	require.NoError(t, err)
	again, err = adm.Complete(ctx, room, "bob", b.AdmissionID)
	require.NoError(t, err)
	assert.True(t, again.Repeated, "the Admissions see the Issuer's completion")
	assert.True(t, first.CompletedAt.Equal(again.CompletedAt))

	for _, id := range []string{a.AdmissionID, b.AdmissionID} {
		assert.ErrorIs(t, adm.CheckActive(ctx, room, id), flashgate.ErrNotFound)
		assert.ErrorIs(t, is.CheckActive(ctx, room, id), flashgate.ErrNotFound)
	}

	c, err := is.Enter(ctx, room, "carol")
	require.NoError(t, err)
	_, err = adm.Complete(ctx, room, "mallory", c.AdmissionID)
	assert.ErrorIs(t, err, flashgate.ErrOwnerMismatch)
	_, err = is.Complete(ctx, room, "mallory", c.AdmissionID)
	assert.ErrorIs(t, err, flashgate.ErrOwnerMismatch)
	require.NoError(t, adm.CheckActive(ctx, room, c.AdmissionID), "a refused completion consumes nothing")
}
