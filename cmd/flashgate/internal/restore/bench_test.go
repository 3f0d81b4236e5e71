package restore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/cmd/flashgate/internal/restore"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/journal"
)

// BenchmarkRestore100k: a room of 100,000 waiting entries (and 1,000 live
// admissions) read from the journal and written into an empty Redis.
// docs/operations.md#restoring-a-room quotes its time.
func BenchmarkRestore100k(b *testing.B) {
	ctx := context.Background()
	b.StopTimer()
	dsnStore := benchStore(b)
	rdb := redistest.Start(b).Client(b)
	const epoch, n, live = "ab12cd34ef", 100_000, 1000
	at := time.Now().UnixMilli()
	cfg := fmt.Sprintf(`{"state":"open","capacity":"%d","rate":"60000","session_ms":"600000","batch":"1000","tick_ms":"1000","epoch":"%s"}`, live, epoch)
	require.NoError(b, dsnStore.Apply(ctx, []journal.Event{{ID: "1-0", Kind: journal.KindConfig, Room: "big", Epoch: epoch, At: at, Detail: cfg}}))
	for start := 1; start <= n; start += 10_000 {
		var evs []journal.Event
		for i := start; i < start+10_000; i++ {
			evs = append(evs, journal.Event{Kind: journal.KindEntered, Room: "big", Epoch: epoch, Arrival: int64(i), User: fmt.Sprintf("u%06d", i), Lane: "public", At: at})
			if i <= live {
				evs = append(evs, journal.Event{Kind: journal.KindAdmitted, Room: "big", Epoch: epoch, Arrival: int64(i), Lane: "public", At: at,
					AdmissionID: fmt.Sprintf("%s.%d.%d.%d", epoch, i, i, at)})
			}
		}
		require.NoError(b, dsnStore.Apply(ctx, evs))
	}
	b.StartTimer()
	for b.Loop() {
		b.StopTimer()
		require.NoError(b, rdb.FlushAll(ctx).Err())
		b.StartTimer()
		res, err := restore.Room(ctx, dsnStore, rdb, "big", time.UnixMilli(at))
		require.NoError(b, err)
		require.Equal(b, n-live, res.Waiting)
	}
}
