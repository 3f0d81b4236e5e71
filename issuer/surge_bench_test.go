package issuer_test

import (
	"context"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/redistest"
	"github.com/flashgate/flashgate/issuer"
)

// surgeAdmitted is how many buyers the surge admits, exchanges and completes.
const surgeAdmitted = 10_000

// BenchmarkSurge is a flash sale's surge on one room, one redis-server
// (issue 24 §4; issuer level, no HTTP): N distinct buyers (env
// FLASHGATE_SURGE_BUYERS, default 1,000,000) enter a paused room from 256
// goroutines, as fast as the coalesced batches allow (Config.EnterBatch's
// default, journal on, exact status); then each polls its status once; then
// the room opens, one Tick admits 10,000 (the head of the line) and those
// exchange their waiting token and complete with the admission token
// (CompleteMinted). It runs the whole surge once per call (use -benchtime 1x)
// and reports, per phase (enter, status, admit, exchange, complete), the
// Redis CPU in seconds (INFO cpu deltas: <phase>-redis-s), the wall time
// (<phase>-wall-s) and the Redis CPU per buyer of the phase (µs-<phase>);
// µs-redis/buyer, the whole surge's Redis CPU over N; buyers/s-core, the
// ceiling one Redis core puts on a room's surge: 1 s / the Redis CPU of one
// buyer's enter and one status poll; and B/waiting-buyer, Redis memory per
// waiting buyer after the enter phase (INFO used_memory delta / N), of which
// B/buyer-journal is the journal stream's (MEMORY USAGE; nobody consumes it
// here, its worst case).
func BenchmarkSurge(b *testing.B) {
	n := 1_000_000
	if s := os.Getenv("FLASHGATE_SURGE_BUYERS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			b.Fatalf("FLASHGATE_SURGE_BUYERS=%q: want a count ≥ 1", s)
		}
	}
	admit := min(n, surgeAdmitted)
	ctx := context.Background()
	rdb := redistest.Start(b).Client(b)
	is := newIssuer(b, rdb, nil, func(c *issuer.Config) { c.StatusSnapshot = -1 })
	room := "surge"
	if _, err := is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: admit, RatePerMinute: 10_000_000,
		SessionDuration: 15 * time.Minute, TickBatch: admit, State: issuer.RoomPaused}); err != nil {
		b.Fatal(err)
	}
	var phaseCPU time.Duration
	phase := func(name string, items int, f func()) {
		cpu0, t0 := redisCPU(b, rdb), time.Now()
		f()
		wall, cpu := time.Since(t0), redisCPU(b, rdb)-cpu0
		phaseCPU += cpu
		b.ReportMetric(cpu.Seconds(), name+"-redis-s")
		b.ReportMetric(wall.Seconds(), name+"-wall-s")
		b.ReportMetric(float64(cpu.Microseconds())/float64(items), "µs-"+name)
	}
	tokens := make([]string, n) // buyer i's waiting token (user "b<i>")
	arrival := make([]int32, n)
	user := func(i int) string { return "b" + strconv.Itoa(i) }

	b.ResetTimer()
	mem0 := usedMemory(b, rdb)
	phase("enter", n, func() {
		parallel(b, n, func(i int) error {
			e, err := is.Enter(ctx, room, user(i))
			if err == nil {
				tokens[i], arrival[i] = e.WaitingToken, int32(e.Arrival)
			}
			return err
		})
	})
	perBuyer := float64(usedMemory(b, rdb)-mem0) / float64(n)
	journal, err := rdb.MemoryUsage(ctx, issuer.RoomKeys(room)[16], 0).Result()
	if err != nil {
		b.Fatal(err)
	}
	phase("status", n, func() {
		parallel(b, n, func(i int) error {
			_, err := is.Status(ctx, room, user(i), tokens[i])
			return err
		})
	})
	firstPoll := phaseCPU
	head := make([]int, 0, admit) // the buyers the tick admits: arrivals 1 … admit
	for i, a := range arrival {
		if int(a) <= admit {
			head = append(head, i)
		}
	}
	phase("admit", admit, func() {
		if _, err := is.SetState(ctx, room, issuer.RoomOpen); err != nil {
			b.Fatal(err)
		}
		r, err := is.Tick(ctx, room)
		if err != nil || r.Admitted != admit {
			b.Fatalf("tick admitted %d of %d: %v", r.Admitted, admit, err)
		}
	})
	admissions := make([]*issuer.Admission, len(head))
	phase("exchange", admit, func() {
		parallel(b, len(head), func(k int) error {
			i := head[k]
			a, err := is.Exchange(ctx, room, user(i), tokens[i])
			admissions[k] = a
			return err
		})
		if err := is.WaitMinted(ctx); err != nil {
			b.Fatal(err)
		}
	})
	phase("complete", admit, func() {
		parallel(b, len(head), func(k int) error {
			a := admissions[k]
			_, err := is.CompleteMinted(ctx, room, a.User, a.ID, a.Token)
			return err
		})
	})
	b.StopTimer()
	b.ReportMetric(float64(phaseCPU.Microseconds())/float64(n), "µs-redis/buyer")
	b.ReportMetric(float64(n)*1e6/float64(firstPoll.Microseconds()), "buyers/s-core")
	b.ReportMetric(perBuyer, "B/waiting-buyer")
	b.ReportMetric(float64(journal)/float64(n), "B/buyer-journal")
}

// parallel runs f(0) … f(n-1) from 256 goroutines; the first error fails b.
func parallel(b *testing.B, n int, f func(i int) error) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Bool
	for range 256 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n) && !failed.Load(); i = next.Add(1) - 1 {
				if err := f(int(i)); err != nil {
					if failed.CompareAndSwap(false, true) {
						b.Error(err)
					}
					return
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() {
		b.FailNow()
	}
}
