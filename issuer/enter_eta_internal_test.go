package issuer

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/redistest"
)

// A batch of newcomers waiting for capacity in a full room reads the
// expiries their slots wait for in one ZRANGE (eta_expiry's read-ahead, one
// more where the ranks wrap around the capacity), and answers exactly what
// one call per user answers (each reading its expiry alone).
func TestEnterBatchReadsTheExpiriesAhead(t *testing.T) {
	ctx := context.Background()
	const t0 = 1_700_000_000_000
	var now atomic.Int64
	now.Store(t0)
	room := redistest.Room("ahead")
	batched, single := twins(t, room, RoomConfig{Capacity: 3, RatePerMinute: 600_000,
		SessionDuration: 10 * time.Minute}, &now)
	for _, w := range []twin{batched, single} {
		for i := range 3 { // three admissions of three expiries: the room is full
			now.Store(t0 + int64(i)*1000)
			got, err := w.is.enterUsers(ctx, room, "a"+strconv.Itoa(i))
			require.NoError(t, err)
			require.Equal(t, flashgate.StateActive, got[0].state)
		}
	}
	now.Store(t0 + 10_000)
	users := []any{"n1", "n2", "n3", "n4", "n5", "n6", "n7"}
	z0 := cmdCalls(t, batched.rdb, "zrange")
	got, err := batched.is.enterUsers(ctx, room, users...)
	require.NoError(t, err)
	require.Equal(t, int64(1), cmdCalls(t, batched.rdb, "zrange")-z0, "one ZRANGE for the batch")

	var want []scriptEntry
	for _, u := range users {
		one, err := single.is.enterUsers(ctx, room, u)
		require.NoError(t, err)
		want = append(want, one...)
	}
	require.Equal(t, want, got)
	seen := map[int64]bool{}
	for _, e := range got {
		require.Equal(t, flashgate.StateWaiting, e.state)
		seen[e.eta.expiry] = true
	}
	require.Len(t, seen, 3, "the newcomers wait for each of the three expiries")
}
