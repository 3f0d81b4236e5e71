package issuer_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/keys"
)

// BenchmarkRoomBeaconRedisCPU is the room beacon's Redis CPU per call
// (lua/roombeacon.lua: a ZCOUNT per bucket boundary, O(log n) each) next to
// one exact status poll's (lua/status.lua, what each page's poll costs
// without the beacon) on the same line of n waiting entries: µs-redis/call
// is INFO commandstats' EVALSHA usec per call. The beacon runs once per
// room per second per replica, whatever the number of pages: its cost is
// per room, a poll's per page.
func BenchmarkRoomBeaconRedisCPU(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000} {
		b.Run("waiting="+strconv.Itoa(n), func(b *testing.B) {
			ctx := context.Background()
			rdb := redistest.Start(b).Client(b)
			ring, err := keys.Generate(time.Now())
			if err != nil {
				b.Fatal(err)
			}
			is := newIssuer(b, rdb, nil, func(c *issuer.Config) { c.Signer = ring; c.StatusSnapshot = -1 })
			room := "bench"
			if _, err := is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 10, RatePerMinute: 600, State: issuer.RoomPaused}); err != nil {
				b.Fatal(err)
			}
			e, err := is.Enter(ctx, room, "u0")
			if err != nil {
				b.Fatal(err)
			}
			// The line: n entries scored by arrival, every tenth gone (written directly: the
			// scripts read only the waiting set's scores here).
			key := "fg:{" + room + "}:waiting"
			for lo := 2; lo <= n; lo += 10_000 {
				zs := make([]redis.Z, 0, 10_000)
				for s := lo; s < lo+10_000 && s <= n; s++ {
					if s%10 != 0 {
						zs = append(zs, redis.Z{Score: float64(s), Member: "u" + strconv.Itoa(s)})
					}
				}
				if err := rdb.ZAdd(ctx, key, zs...).Err(); err != nil {
					b.Fatal(err)
				}
			}
			for _, op := range []string{"roombeacon", "status"} {
				b.Run("op="+op, func(b *testing.B) {
					before := commandStats(b, rdb)
					for range b.N {
						var err error
						if op == "roombeacon" {
							_, _, err = is.RoomBeacon(ctx, room, 5*time.Second, 7*time.Second)
						} else {
							_, err = is.Status(ctx, room, "u0", e.WaitingToken)
						}
						if err != nil {
							b.Fatal(err)
						}
					}
					d := commandStats(b, rdb).sub(before)
					calls, usec := d["evalsha"][0], d["evalsha"][1]
					if calls > 0 {
						b.ReportMetric(usec/calls, "µs-redis/call")
					}
				})
			}
		})
	}
}
