package issuer_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/redistest"
	"github.com/flashgate/flashgate/issuer"
)

// redisCPU returns the CPU time redis-server has used (INFO cpu:
// used_cpu_user + used_cpu_sys, the main thread and its helpers).
func redisCPU(b *testing.B, rdb *redis.Client) time.Duration {
	b.Helper()
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var s float64
	for _, line := range strings.Split(info, "\r\n") {
		for _, k := range []string{"used_cpu_user:", "used_cpu_sys:"} {
			if v, ok := strings.CutPrefix(line, k); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatal(err)
				}
				s += f
			}
		}
	}
	return time.Duration(s * float64(time.Second))
}

// BenchmarkScriptRedisCPU measures, for each hot operation, the Redis CPU
// time per operation (INFO cpu deltas over the timed loop, µs-redis/op)
// under concurrency (64 goroutines: SetParallelism 32 on two cores), with
// coalescing on (batch=32, the default: items/call is the mean batch) and
// off (batch=1, one script call per operation), next to its physical
// limit in the same run: one PING per operation (op=ping), the cheapest
// command's dispatch, read and reply. Each sub-benchmark has its own
// redis-server (internal/redistest), so the CPU is this loop's alone (the
// server's own cron included: a few µs per second). Operations:
//   - enter: a new user per call into a paused room (capacity 1);
//   - status: an exact Status (StatusSnapshot off) of one of 2,000 waiting users;
//   - exchange: an Exchange of one of 2,000 admitted users (a repeated claim: a journal write each);
//   - complete: a Complete of a distinct admission per call (admitted before the loop);
//   - complete-minted: the same through CompleteMinted, with each admission's token
//     minted (Exchange) before the loop: the /v1/complete path of a token this issuer
//     minted (its note's GET in the complete script; its admissions are claimed, so
//     the script skips the unclaimed lookup complete's unclaimed admissions need).
//
// Exchange's minted notes are written in the background: the loop's Redis
// CPU is read once they have landed (WaitMinted), so exchange counts them.
//
// The target: Redis CPU per completion ≤ 2× per enter.
func BenchmarkScriptRedisCPU(b *testing.B) {
	for _, n := range []int{1, issuer.DefaultEnterBatch} {
		for _, op := range []string{"ping", "enter", "status", "exchange", "complete", "complete-minted"} {
			b.Run("batch="+strconv.Itoa(n)+"/op="+op, func(b *testing.B) { benchRedisCPU(b, n, op) })
		}
	}
}

func benchRedisCPU(b *testing.B, batch int, op string) {
	ctx := context.Background()
	rdb := redistest.Start(b).Client(b)
	is := newIssuer(b, rdb, nil, func(c *issuer.Config) { c.EnterBatch = batch; c.StatusSnapshot = -1 })
	room := "bench"
	open := issuer.RoomConfig{Capacity: 10_000_000, RatePerMinute: 10_000_000, SessionDuration: 15 * time.Minute,
		TickBatch: 10_000, State: issuer.RoomOpen}
	var fn func(i int64) error
	switch op {
	case "ping":
		fn = func(int64) error { return rdb.Ping(ctx).Err() }
	case "enter":
		if _, err := is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 1, State: issuer.RoomPaused}); err != nil {
			b.Fatal(err)
		}
		fn = func(i int64) error {
			_, err := is.Enter(ctx, room, "u"+strconv.FormatInt(i, 10))
			return err
		}
	case "status", "exchange":
		cfg := issuer.RoomConfig{Capacity: 1, State: issuer.RoomPaused}
		if op == "exchange" {
			cfg = open
		}
		if _, err := is.SetRoom(ctx, room, cfg); err != nil {
			b.Fatal(err)
		}
		es := entered(b, is, room, 2000, op == "exchange")
		fn = func(i int64) error {
			e := es[i%int64(len(es))]
			if op == "status" {
				_, err := is.Status(ctx, room, e.User, e.WaitingToken)
				return err
			}
			_, err := is.Exchange(ctx, room, e.User, e.WaitingToken)
			return err
		}
	case "complete", "complete-minted":
		if _, err := is.SetRoom(ctx, room, open); err != nil {
			b.Fatal(err)
		}
		es := entered(b, is, room, b.N+64, true)
		if op == "complete" {
			fn = func(i int64) error {
				e := es[i-1]
				_, err := is.Complete(ctx, room, e.User, e.AdmissionID)
				return err
			}
			break
		}
		tokens := make([]string, len(es))
		for i, e := range es {
			a, err := is.Exchange(ctx, room, e.User, e.WaitingToken)
			if err != nil {
				b.Fatal(err)
			}
			tokens[i] = a.Token
		}
		if err := is.WaitMinted(ctx); err != nil {
			b.Fatal(err)
		}
		fn = func(i int64) error {
			e := es[i-1]
			_, err := is.CompleteMinted(ctx, room, e.User, e.AdmissionID, tokens[i-1])
			return err
		}
	}
	_ = fn(1) // loads the script
	base := is.ScriptBatchStats()
	var next atomic.Int64
	next.Store(1)
	cpu0 := redisCPU(b, rdb)
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := fn(next.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	if err := is.WaitMinted(ctx); err != nil {
		b.Fatal(err)
	}
	cpu := redisCPU(b, rdb) - cpu0
	b.ReportMetric(float64(cpu.Nanoseconds())/1000/float64(b.N), "µs-redis/op")
	st := is.ScriptBatchStats()
	k := map[string][2]issuer.BatchStats{"enter": {base.Enter, st.Enter}, "status": {base.Status, st.Status},
		"exchange": {base.Exchange, st.Exchange}, "complete": {base.Complete, st.Complete},
		"complete-minted": {base.Complete, st.Complete}}[op]
	if calls := k[1].Calls - k[0].Calls; calls > 0 {
		b.ReportMetric(float64(k[1].Items-k[0].Items)/float64(calls), "items/call")
	}
}

// entered enters n distinct users into room (from 64 goroutines, coalesced
// as configured) and returns their entries: all ACTIVE when active (the
// room must admit them on the fast track), else all WAITING.
func entered(b *testing.B, is *issuer.Issuer, room string, n int, active bool) []*issuer.Entry {
	b.Helper()
	ctx := context.Background()
	es := make([]*issuer.Entry, n)
	var next atomic.Int64
	done := make(chan struct{})
	for range 64 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				e, err := is.Enter(ctx, room, "p"+strconv.FormatInt(i, 10))
				if err != nil {
					b.Error(err)
					return
				}
				es[i-1] = e
			}
		}()
	}
	for range 64 {
		<-done
	}
	want := "WAITING"
	if active {
		want = "ACTIVE"
	}
	for _, e := range es {
		if e == nil || string(e.State) != want {
			b.Fatalf("entered: want every entry %s, got %+v", want, e)
		}
	}
	return es
}
