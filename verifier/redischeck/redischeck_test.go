package redischeck_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/redistest"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/verifier"
	"github.com/flashgate/flashgate/verifier/redischeck"
)

func TestCompleteAndCheckActive(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	is, room := issuerRoom(t, rdb)
	a, err := is.Enter(ctx, room, "alice")
	require.NoError(t, err)
	b, err := is.Enter(ctx, room, "bob")
	require.NoError(t, err)

	chk, err := redischeck.New(rdb)
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
	assert.ErrorIs(t, chk.CheckActive(ctx, ta), issuer.ErrNotFound, "completed: no longer active")

	_, err = is.Revoke(ctx, room, "", b.AdmissionID)
	require.NoError(t, err)
	assert.ErrorIs(t, chk.CheckActive(ctx, tb), issuer.ErrNotFound)
	_, err = chk.Complete(ctx, tb)
	assert.ErrorIs(t, err, issuer.ErrRevoked)
}

func TestRedisAwayFailsClosed(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	chk, err := redischeck.New(rdb)
	require.NoError(t, err)
	srv.Kill()
	tok := &verifier.Token{Product: "sku", User: "alice", ID: "e0.1.1.1"}
	_, err = chk.Complete(context.Background(), tok)
	assert.ErrorIs(t, err, issuer.ErrUnavailable)
	assert.ErrorIs(t, chk.CheckActive(context.Background(), tok), issuer.ErrUnavailable)
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
	chk, err := redischeck.New(rdb, redischeck.WithCompletionReplicas(1, 50*time.Millisecond))
	require.NoError(t, err)
	_, err = chk.Complete(ctx, tok)
	assert.ErrorIs(t, err, issuer.ErrUnavailable)
	assert.Contains(t, err.Error(), "0 of 1 replicas")

	// With a replica attached, the retry returns the first result.
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(srv.Port))
	require.Eventually(t, func() bool {
		info, _ := rdb.Info(ctx, "replication").Result()
		return strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online")
	}, 10*time.Second, 50*time.Millisecond, "replica %s attached", replica.Addr)
	chk, err = redischeck.New(rdb, redischeck.WithCompletionReplicas(1, 2*time.Second))
	require.NoError(t, err)
	c, err := chk.Complete(ctx, tok)
	require.NoError(t, err)
	assert.True(t, c.Repeated)

	_, err = redischeck.New(redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr}}),
		redischeck.WithCompletionReplicas(1, 0))
	assert.ErrorIs(t, err, issuer.ErrInvalidInput, "WAIT is per node: not on Cluster")
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
