package issuer_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
)

// TestStatusFromNews: one News read (two Redis commands) places every buyer
// far behind the head without a Redis call, at the exact script's position
// while nobody has left; buyers near the head, and any call without news,
// get the exact script. The news carries the room's state and page message,
// and Changed sees an edit of either.
func TestStatusFromNews(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	room := redistest.Room("news")
	is, err := issuer.New(issuer.Config{Redis: rdb, WaitingSecret: secret})
	require.NoError(t, err)
	_, err = is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 1, RatePerMinute: 60, State: issuer.RoomPaused,
		PageMessage: "hello"})
	require.NoError(t, err)
	toks := map[int]string{}
	for i := 1; i <= 300; i++ {
		e, err := is.Enter(ctx, room, "u"+strconv.Itoa(i))
		require.NoError(t, err)
		toks[i] = e.WaitingToken
	}
	n, err := is.News(ctx, room, time.Second)
	require.NoError(t, err)
	assert.Equal(t, issuer.RoomPaused, n.State)
	assert.Equal(t, "hello", n.PageMessage)
	assert.True(t, n.Changed(nil))

	before := evalCalls(t, rdb)
	for i := 100; i <= 300; i++ {
		e, exact, err := is.StatusFrom(ctx, n, room, "u"+strconv.Itoa(i), toks[i])
		require.NoError(t, err)
		assert.False(t, exact, "u%d", i)
		assert.True(t, e.PositionEstimated)
		assert.EqualValues(t, i, e.Position, "u%d", i)
		assert.Equal(t, issuer.RoomPaused, e.RoomState)
	}
	assert.Equal(t, before, evalCalls(t, rdb), "no script call for buyers placed from the news")

	for _, i := range []int{1, 2, 30} {
		e, exact, err := is.StatusFrom(ctx, n, room, "u"+strconv.Itoa(i), toks[i])
		require.NoError(t, err)
		assert.True(t, exact, "u%d near the head", i)
		assert.False(t, e.PositionEstimated)
		assert.EqualValues(t, i, e.Position)
	}
	_, exact, err := is.StatusFrom(ctx, nil, room, "u200", toks[200])
	require.NoError(t, err)
	assert.True(t, exact, "no news: the exact script")

	msg := "back at noon"
	_, _, err = is.UpdateRoom(ctx, room, issuer.RoomPatch{PageMessage: &msg})
	require.NoError(t, err)
	n2, err := is.News(ctx, room, time.Second)
	require.NoError(t, err)
	assert.True(t, n2.Changed(n))
	assert.Equal(t, msg, n2.PageMessage)
	n3, err := is.News(ctx, room, time.Second)
	require.NoError(t, err)
	assert.False(t, n3.Changed(n2), "nothing changed")
	_, err = is.SetState(ctx, room, issuer.RoomOpen)
	require.NoError(t, err)
	n4, err := is.News(ctx, room, time.Second)
	require.NoError(t, err)
	assert.True(t, n4.Changed(n3))
	assert.Equal(t, issuer.RoomOpen, n4.State)
}
