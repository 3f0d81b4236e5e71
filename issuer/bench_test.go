package issuer_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/keys"
)

const memUsers = 100_000

func usedMemory(b *testing.B, rdb *redis.Client) int64 {
	info, err := rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	b.Fatal("no used_memory in INFO")
	return 0
}

// enterAll enters users prefix+"1" … prefix+n into room from workers
// goroutines (arrival order among them is any order), reporting errors on tb.
func enterAll(tb testing.TB, is *issuer.Issuer, room, prefix string, n int64, workers int) {
	tb.Helper()
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := next.Add(1); i <= n; i = next.Add(1) {
				if _, err := is.Enter(ctx, room, prefix+strconv.FormatInt(i, 10)); err != nil {
					tb.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkWaitingUserMemory reports Redis memory per waiting user with
// 100,000 users in line (INFO used_memory delta on a dedicated server), for
// flashgate's layout and, in the same run, for a naive layout (a
// UUID per user in the waiting ZSET plus one USER_INDEX string key per user).
func BenchmarkWaitingUserMemory(b *testing.B) {
	ctx := context.Background()
	measure := func(b *testing.B, fill func(rdb *redis.Client)) {
		srv := redistest.Start(b)
		rdb := srv.Client(b)
		before := usedMemory(b, rdb)
		fill(rdb)
		b.ReportMetric(float64(usedMemory(b, rdb)-before)/memUsers, "bytes/user")
	}
	// flashgate: the journal on and nobody consuming it (its worst case: every
	// entered event still in the stream); no-journal: Config.JournalMaxLen < 0,
	// which is also what a consumer that keeps up leaves (it trims what it wrote).
	for _, tc := range []struct {
		name    string
		journal int64
	}{{"flashgate", 0}, {"no-journal", -1}} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				measure(b, func(rdb *redis.Client) {
					is := newIssuer(b, rdb, nil, func(c *issuer.Config) { c.JournalMaxLen = tc.journal })
					room := "sku-1"
					_, err := is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 1, State: issuer.RoomPaused})
					if err != nil {
						b.Fatal(err)
					}
					enterAll(b, is, room, "user-", memUsers, 16)
					if n := rdb.ZCard(ctx, issuer.RoomKeys(room)[1]).Val(); n != memUsers {
						b.Fatalf("waiting = %d, want %d", n, memUsers)
					}
					// The journal's last batch entry ends with the last arrival's entered event.
					last := rdb.XRevRangeN(ctx, issuer.RoomKeys(room)[16], "+", "-", 1).Val()
					var ev string
					if len(last) == 1 {
						evs, _ := last[0].Values["events"].(string)
						ev = evs[strings.LastIndexByte(evs, '\n')+1:]
					}
					if want := fmt.Sprintf("entered,%d,", memUsers); strings.HasPrefix(ev, want) != (tc.journal == 0) {
						b.Fatalf("journal's last event %q (journal on: want %s…)", ev, want)
					}
				})
			}
		})
	}
	// Every queue policy on: a shuffled pre-queue (measured before the draw
	// and again once everyone is placed), the arrival window, 1 % of the
	// line banned meanwhile (the ban's members replace their entries) and
	// 5 % in the priority lane through single-use invites, with the rest of
	// the line admitted after them.
	b.Run("every-policy", func(b *testing.B) {
		for range b.N {
			srv := redistest.Start(b)
			rdb := srv.Client(b)
			before := usedMemory(b, rdb)
			ring, err := keys.Generate(time.Now())
			if err != nil {
				b.Fatal(err)
			}
			clk := newClock()
			is := newIssuer(b, rdb, clk, func(c *issuer.Config) { c.Signer = ring })
			room := "sku-1"
			opens := clk.Now().Add(time.Hour)
			if _, err := is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 1, Opens: opens,
				PreQueue: issuer.PreQueueShuffle, ArrivalWindow: 30 * time.Second}); err != nil {
				b.Fatal(err)
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := next.Add(1); i <= memUsers; i = next.Add(1) {
						user := "user-" + strconv.FormatInt(i, 10)
						var err error
						if i%20 == 0 {
							var inv []issuer.Invite
							if inv, err = is.Invites(room, issuer.InviteOptions{User: user}); err == nil {
								_, err = is.EnterWithInvite(ctx, room, user, inv[0].Token)
							}
						} else {
							_, err = is.Enter(ctx, room, user)
						}
						if err == nil && i%100 == 1 {
							_, err = is.Ban(ctx, room, user, time.Hour, "bot")
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(usedMemory(b, rdb)-before)/memUsers, "bytes/user-prequeue")
			clk.Advance(time.Hour)
			for {
				res, err := is.Tick(ctx, room)
				if err != nil {
					b.Fatal(err)
				}
				if res.Placed == 0 && res.Admitted == 0 {
					break
				}
			}
			b.ReportMetric(float64(usedMemory(b, rdb)-before)/memUsers, "bytes/user-placed")
		}
	})
	b.Run("naive-seed-layout", func(b *testing.B) {
		for range b.N {
			measure(b, func(rdb *redis.Client) {
				pipe := rdb.Pipeline()
				var u [16]byte
				for i := 1; i <= memUsers; i++ {
					_, _ = rand.Read(u[:])
					id := hex.EncodeToString(u[:4]) + "-" + hex.EncodeToString(u[4:6]) + "-" + hex.EncodeToString(u[6:8]) +
						"-" + hex.EncodeToString(u[8:10]) + "-" + hex.EncodeToString(u[10:])
					pipe.ZAdd(ctx, "waiting_queue:product:1", redis.Z{Score: float64(1763640000000 + i), Member: id})
					pipe.Set(ctx, "queue:user:product:1:user-"+strconv.Itoa(i), id, 0)
					if i%1000 == 0 {
						if _, err := pipe.Exec(ctx); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	})
}

// BenchmarkEnter measures Enter for distinct users from 64 goroutines
// (SetParallelism 32 on two cores), with concurrent enters coalesced
// (batch=32, the default) and with one script call per enter (batch=1).
// users/call is the mean batch.
func BenchmarkEnter(b *testing.B) {
	for _, n := range []int{1, issuer.DefaultEnterBatch} {
		b.Run("batch="+strconv.Itoa(n), func(b *testing.B) {
			ctx := context.Background()
			rdb := redistest.Start(b).Client(b)
			is := newIssuer(b, rdb, nil, func(c *issuer.Config) { c.EnterBatch = n })
			_, _ = is.SetRoom(ctx, "bench", issuer.RoomConfig{Capacity: 1, State: issuer.RoomPaused})
			var u atomic.Int64
			b.SetParallelism(32)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := is.Enter(ctx, "bench", "u"+strconv.FormatInt(u.Add(1), 10)); err != nil {
						b.Error(err)
					}
				}
			})
			b.StopTimer()
			st := is.Observe().Batches.Enter
			b.ReportMetric(float64(st.Items)/float64(st.Calls), "users/call")
		})
	}
}

// BenchmarkRedisPing is the physical floor for BenchmarkEnter: one round
// trip to the same server with the same client, from as many goroutines.
func BenchmarkRedisPing(b *testing.B) {
	ctx := context.Background()
	rdb := redistest.Start(b).Client(b)
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := rdb.Ping(ctx).Err(); err != nil {
				b.Error(err)
			}
		}
	})
}

// BenchmarkTickRedisTime measures how long one Tick keeps Redis busy: a
// room with batch users waiting (capacity and rate out of the way) is
// ticked once per iteration on a private redis-server while another
// connection sends PING after PING. Per tick it takes the longest single
// script call in Redis (SLOWLOG with a 0 µs threshold records every
// command's execution time) and the longest PING round trip seen meanwhile
// (what any other client of that Redis waits), and reports their medians
// over the iterations, the script calls per tick, the script time per
// admitted user, and the median idle PING
// round trip measured just before each tick as the reference. Not a unit
// test: the numbers depend on the host (docs/performance.md#measurements).
func BenchmarkTickRedisTime(b *testing.B) {
	for _, batch := range []int{1000, 10_000} {
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) {
			ctx := context.Background()
			srv := redistest.Start(b)
			rdb, ping := srv.Client(b), srv.Client(b)
			is := newIssuer(b, rdb, nil)
			if err := rdb.ConfigSet(ctx, "slowlog-max-len", "1000000").Err(); err != nil {
				b.Fatal(err)
			}
			_, _ = is.Tick(ctx, "warm-up") // loads the script: no NOSCRIPT round in the log
			median := func(d []time.Duration) float64 {
				slices.Sort(d)
				return float64(d[len(d)/2].Microseconds())
			}
			var worstCalls, worstPings, idlePings []time.Duration
			var scriptTime time.Duration
			calls, admitted := 0, 0
			b.StopTimer()
			for i := range b.N {
				room := "tick-" + strconv.Itoa(i)
				_, err := is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 10_000_000, RatePerMinute: 10_000_000,
					TickBatch: batch, State: issuer.RoomPaused})
				if err != nil {
					b.Fatal(err)
				}
				var next atomic.Int64
				var wg sync.WaitGroup
				for range 16 {
					wg.Go(func() {
						for u := next.Add(1); u <= int64(batch); u = next.Add(1) {
							if _, err := is.Enter(ctx, room, "u"+strconv.FormatInt(u, 10)); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				if _, err := is.SetState(ctx, room, issuer.RoomOpen); err != nil {
					b.Fatal(err)
				}
				idle := make([]time.Duration, 0, 101)
				for range 101 {
					t0 := time.Now()
					if err := ping.Ping(ctx).Err(); err != nil {
						b.Fatal(err)
					}
					idle = append(idle, time.Since(t0))
				}
				slices.Sort(idle)
				idlePings = append(idlePings, idle[50])
				_ = rdb.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err()
				_ = rdb.SlowLogReset(ctx).Err()
				stop := make(chan struct{})
				var pingMax time.Duration
				var pinger sync.WaitGroup
				pinger.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						t0 := time.Now()
						if err := ping.Ping(ctx).Err(); err != nil {
							b.Error(err)
							return
						}
						pingMax = max(pingMax, time.Since(t0))
					}
				})
				b.StartTimer()
				res, err := is.Tick(ctx, room)
				b.StopTimer()
				close(stop)
				pinger.Wait()
				_ = rdb.ConfigSet(ctx, "slowlog-log-slower-than", "10000").Err()
				if err != nil {
					b.Fatal(err)
				}
				if res.Admitted != batch {
					b.Fatalf("admitted %d, want %d", res.Admitted, batch)
				}
				admitted += res.Admitted
				log, err := rdb.SlowLogGet(ctx, -1).Result()
				if err != nil {
					b.Fatal(err)
				}
				var worst time.Duration
				for _, e := range log {
					if name := strings.ToLower(fmt.Sprint(e.Args[0])); name == "evalsha" || name == "eval" {
						calls++
						worst = max(worst, e.Duration)
						scriptTime += e.Duration
					}
				}
				worstCalls = append(worstCalls, worst)
				worstPings = append(worstPings, pingMax)
			}
			b.ReportMetric(float64(calls)/float64(b.N), "script-calls/tick")
			b.ReportMetric(float64(scriptTime.Microseconds())/float64(admitted), "script-µs/admitted")
			b.ReportMetric(median(worstCalls), "µs/longest-script-call")
			b.ReportMetric(median(worstPings), "µs/longest-PING-during-tick")
			b.ReportMetric(median(idlePings), "µs/PING-idle")
		})
	}
}

// BenchmarkStatus measures Status for a waiting user in a capacity-bound
// room (capacity 1,000, all live, 10,000 waiting, a minute of admissions and
// ends in the logs) with every status exact (Config.StatusSnapshot off): the
// round trip per call (ns/op, from one goroutine), and the status script's
// own time in Redis (SLOWLOG with a 0 µs threshold; p10, median and p99 over
// the calls: on a shared host the p10 is the least disturbed). Not a unit test: the numbers depend on the host (docs/performance.md#measurements).
func BenchmarkStatus(b *testing.B) {
	ctx := context.Background()
	srv := redistest.Start(b)
	rdb := srv.Client(b)
	clk := newClock()
	is := newIssuer(b, rdb, clk, func(c *issuer.Config) { c.StatusSnapshot = -1 })
	room := "bench"
	const capacity, waiting = 1000, 10_000
	_, err := is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: capacity, RatePerMinute: 100_000,
		SessionDuration: 5 * time.Minute, TickBatch: 10_000, State: issuer.RoomOpen})
	if err != nil {
		b.Fatal(err)
	}
	// About a minute of history: the entries over 55 s, a tenth of the admitted completed.
	var all []*issuer.Entry
	for i := range capacity + waiting {
		e, err := is.Enter(ctx, room, "u"+strconv.Itoa(i))
		if err != nil {
			b.Fatal(err)
		}
		all = append(all, e)
		if e.State == "ACTIVE" && i%10 == 0 {
			if _, err := is.Complete(ctx, room, "u"+strconv.Itoa(i), e.AdmissionID); err != nil {
				b.Fatal(err)
			}
		}
		if i%20 == 0 {
			clk.Advance(100 * time.Millisecond)
			if _, err := is.Tick(ctx, room); err != nil {
				b.Fatal(err)
			}
		}
	}
	var users, tokens []string
	for _, e := range all {
		if e.State != "WAITING" {
			continue
		}
		if st, err := is.Status(ctx, room, e.User, e.WaitingToken); err == nil && st.State == "WAITING" {
			users, tokens = append(users, e.User), append(tokens, e.WaitingToken)
		}
	}
	if len(tokens) < waiting/2 {
		b.Fatalf("only %d waiting", len(tokens))
	}
	_, _ = is.Status(ctx, room, users[0], tokens[0]) // loads the script
	_ = rdb.ConfigSet(ctx, "slowlog-max-len", "1000000").Err()
	_ = rdb.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err()
	_ = rdb.SlowLogReset(ctx).Err()
	b.ResetTimer()
	for i := range b.N {
		k := (i * 7919) % len(tokens)
		e, err := is.Status(ctx, room, users[k], tokens[k])
		if err != nil || e.State != "WAITING" {
			b.Fatalf("status: %v %v", e, err)
		}
	}
	b.StopTimer()
	_ = rdb.ConfigSet(ctx, "slowlog-log-slower-than", "10000").Err()
	log, err := rdb.SlowLogGet(ctx, -1).Result()
	if err != nil {
		b.Fatal(err)
	}
	var d []time.Duration
	for _, e := range log {
		if name := strings.ToLower(fmt.Sprint(e.Args[0])); name == "evalsha" || name == "eval" {
			d = append(d, e.Duration)
		}
	}
	if len(d) == 0 {
		b.Fatal("no script calls in SLOWLOG")
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/10].Nanoseconds())/1000, "µs/script-p10")
	b.ReportMetric(float64(d[len(d)/2].Nanoseconds())/1000, "µs/script-median")
	b.ReportMetric(float64(d[len(d)*99/100].Nanoseconds())/1000, "µs/script-p99")
}
