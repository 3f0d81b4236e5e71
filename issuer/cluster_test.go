package issuer_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
)

// randomRoom draws a valid room id of random length and charset.
func randomRoom(r *rand.Rand) string {
	const cs = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~@+="
	b := make([]byte, 1+r.IntN(issuer.MaxIDLen))
	for i := range b {
		b[i] = cs[r.IntN(len(cs))]
	}
	return string(b)
}

func TestRedisCluster(t *testing.T) {
	ctx := context.Background()
	cl := redistest.StartCluster(t, 3)
	rdb := cl.Client(t)

	t.Run("every script's keys hash to one slot", func(t *testing.T) {
		node := cl.Nodes[0].Client(t)
		r := rand.New(rand.NewPCG(1, 2))
		for range 300 {
			room := randomRoom(r)
			require.True(t, issuer.ValidID(room))
			keys := issuer.RoomKeys(room)
			want, err := node.ClusterKeySlot(ctx, keys[0]).Result()
			require.NoError(t, err)
			for _, k := range keys[1:] {
				got, err := node.ClusterKeySlot(ctx, k).Result()
				require.NoError(t, err)
				assert.Equal(t, want, got, "room %q key %q", room, k)
			}
		}
	})

	// Rooms whose slots live on three different masters.
	rooms := map[string]string{}
	r := rand.New(rand.NewPCG(3, 4))
	for len(rooms) < 3 {
		room := "sku-" + strconv.Itoa(r.IntN(1_000_000))
		master, err := rdb.MasterForKey(ctx, issuer.RoomKeys(room)[0])
		require.NoError(t, err)
		owner := master.Options().Addr
		if _, taken := rooms[owner]; !taken {
			rooms[owner] = room
		}
	}

	t.Run("full flow on every master", func(t *testing.T) {
		clk := newClock()
		is := newIssuer(t, rdb, clk)
		for _, room := range rooms {
			_, err := is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 1, SessionDuration: time.Minute})
			require.NoError(t, err)
			a, err := is.Enter(ctx, room, "alice")
			require.NoError(t, err)
			require.Equal(t, flashgate.StateActive, a.State)
			b, err := is.Enter(ctx, room, "bob")
			require.NoError(t, err)
			require.Equal(t, flashgate.StateWaiting, b.State)
			adm, err := is.Exchange(ctx, room, "alice", a.WaitingToken)
			require.NoError(t, err)
			_, err = is.Complete(ctx, room, "alice", adm.ID)
			require.NoError(t, err)
			clk.Advance(time.Second)
			res, err := is.Tick(ctx, room)
			require.NoError(t, err)
			assert.Equal(t, 1, res.Admitted)
			st, err := is.Status(ctx, room, "bob", b.WaitingToken)
			require.NoError(t, err)
			assert.Equal(t, flashgate.StateActive, st.State)
			_, err = is.Revoke(ctx, room, "bob", "")
			require.NoError(t, err)
			stats, err := is.Stats(ctx, room)
			require.NoError(t, err)
			assert.EqualValues(t, 1, stats.Completed)
			assert.EqualValues(t, 1, stats.Revoked)
		}
		listed, err := is.Rooms(ctx)
		require.NoError(t, err)
		for _, room := range rooms {
			assert.Contains(t, listed, room)
		}
	})

	t.Run("bans live in the room's slot", func(t *testing.T) {
		clk := newClock()
		is := newIssuer(t, rdb, clk)
		for _, room := range rooms {
			room += "-ban"
			_, err := is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 1, SessionDuration: time.Minute})
			require.NoError(t, err)
			a, err := is.Enter(ctx, room, "alice")
			require.NoError(t, err)
			b, err := is.Enter(ctx, room, "bob")
			require.NoError(t, err)
			_, err = is.Ban(ctx, room, "bob", time.Hour, "cluster")
			require.NoError(t, err)
			_, err = is.Ban(ctx, room, "alice", time.Hour, "")
			require.NoError(t, err)
			for _, e := range []*issuer.Entry{a, b} {
				st, err := is.Status(ctx, room, e.User, e.WaitingToken)
				require.NoError(t, err)
				assert.Equal(t, flashgate.StateRevoked, st.State, e.User)
				_, err = is.Enter(ctx, room, e.User)
				assert.ErrorIs(t, err, flashgate.ErrBanned, e.User)
			}
			p, err := is.Bans(ctx, room, "", 10)
			require.NoError(t, err)
			assert.EqualValues(t, 2, p.Total)
			clk.Advance(time.Hour)
			_, err = is.Tick(ctx, room)
			require.NoError(t, err)
			_, err = is.Enter(ctx, room, "bob")
			require.NoError(t, err, "the ban ended")
		}
	})

	t.Run("invariants", func(t *testing.T) {
		for _, room := range rooms {
			invariantRun(t, rdb, room+"-inv", 400, 3000, 5*time.Second, 1, "capacity")
		}
	})
	// The auto-room limit's key (fg:autorooms) lives in its own slot, apart
	// from the rooms it counts: two replicas creating rooms on three masters
	// stop at the limit, and deleting one frees its place.
	t.Run("auto rooms", func(t *testing.T) {
		clk := newClock()
		auto := func(c *issuer.Config) {
			c.DefaultRoom = &issuer.RoomConfig{Capacity: 1}
			c.MaxAutoRooms = 2
		}
		reps := []*issuer.Issuer{newIssuer(t, rdb, clk, auto), newIssuer(t, rdb, clk, auto)}
		var made []string
		for _, room := range rooms {
			room += "-auto"
			_, err := reps[len(made)%2].Enter(ctx, room, "alice")
			if len(made) < 2 {
				require.NoError(t, err, room)
				made = append(made, room)
				continue
			}
			require.ErrorIs(t, err, flashgate.ErrRoomLimit, room)
			_, err = reps[0].DeleteRoom(ctx, made[0])
			require.NoError(t, err)
			for range 3 { // the deleted room drains and leaves; its slot is freed
				clk.Advance(time.Second)
				_, _ = reps[1].Tick(ctx, made[0])
			}
			_, err = reps[1].Enter(ctx, room, "alice")
			require.NoError(t, err, "a deleted auto room frees its place")
		}
	})

	// Every policy at once (lottery, arrival window, lanes and invites, bans,
	// leaves, sold-out and its drain) on a room of each master.
	t.Run("every policy", func(t *testing.T) {
		for _, room := range rooms {
			everyPolicyRun(t, rdb, room+"-every")
		}
	})
}
