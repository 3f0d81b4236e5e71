package issuer_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
)

// BenchmarkIdleRoomTicks: ticks per second one replica's Run spends on
// 1,000 idle rooms (registered, nobody waiting, nothing live; tick 1 s),
// over a window of FLASHGATE_IDLE_WINDOW (default 30 s) of real time:
// "every-tick" is Run without the idle back-off (IdleTickMax −1, every room
// at its tick: the behaviour before), "backoff" the default (idle rooms up to
// every 10 s). Reports ticks/s over the whole window and over its last
// third (steady state). Run with -benchtime=1x.
//
//	go test -run '^$' -bench BenchmarkIdleRoomTicks -benchtime=1x ./issuer/
func BenchmarkIdleRoomTicks(b *testing.B) {
	window := 30 * time.Second
	if s := os.Getenv("FLASHGATE_IDLE_WINDOW"); s != "" {
		window, _ = time.ParseDuration(s)
	}
	for _, c := range []struct {
		name string
		max  time.Duration
	}{{"every-tick", -1}, {"backoff", 0}} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				rdb := redistest.Start(b).Client(b)
				total, steady := idleTicks(b, rdb, c.max, window)
				b.ReportMetric(total, "ticks/s")
				b.ReportMetric(steady, "steady-ticks/s")
			}
		})
	}
}

func idleTicks(b *testing.B, rdb *redis.Client, maxIdle time.Duration, window time.Duration) (total, steady float64) {
	ctx := context.Background()
	is := newIssuer(b, rdb, nil, func(c *issuer.Config) { c.IdleTickMax = maxIdle })
	for i := 0; i < 1000; i++ {
		_, err := is.SetRoom(ctx, "idle-"+strconv.Itoa(i), issuer.RoomConfig{})
		require.NoError(b, err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = is.Run(rctx); close(done) }()
	b.ResetTimer()
	time.Sleep(window * 2 / 3)
	mid := is.Observe().TickCalls
	time.Sleep(window / 3)
	end := is.Observe().TickCalls
	b.StopTimer()
	cancel()
	<-done
	return float64(end) / window.Seconds(), float64(end-mid) / (window / 3).Seconds()
}
