package issuer_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/keys"
)

// TestSentinelFailover kills the master in the middle of a sale with the
// queue policies on — a shuffled pre-queue (the room opens 400 ms in), the
// arrival window (every buyer claims by an exchange before ordering) and a
// priority lane (every fifth buyer holds an invite): the issuer replicas
// follow the promoted replica through the Sentinel, buyers retry what failed
// while Redis was away, and afterwards no admission has been completed
// twice, live admissions never exceeded capacity and admissions stayed in
// order: per lane, the pre-queue in the lottery's order.
func TestSentinelFailover(t *testing.T) {
	const users, capacity = 300, 10
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	set := redistest.StartSentinel(t)
	rdb := set.Client(t)
	ring, err := keys.Generate(time.Now())
	require.NoError(t, err)
	var replicas []*issuer.Issuer
	for range 3 {
		is, err := issuer.New(issuer.Config{Redis: rdb, WaitingSecret: secret, Signer: ring,
			CompletionReplicas: 1, CompletionTimeout: 500 * time.Millisecond, Logger: quietLogger()})
		require.NoError(t, err)
		replicas = append(replicas, is)
		go func() { _ = is.Run(ctx) }()
	}
	room := redistest.Room("failover")
	_, err = replicas[0].SetRoom(ctx, room, issuer.RoomConfig{Capacity: capacity, RatePerMinute: 60000,
		SessionDuration: 30 * time.Second, Tick: 100 * time.Millisecond, ArrivalWindow: 10 * time.Second,
		PreQueue: issuer.PreQueueShuffle, Opens: time.Now().Add(400 * time.Millisecond)})
	require.NoError(t, err)

	retry := func(f func() error) error {
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := f()
			if err == nil || !errors.Is(err, flashgate.ErrUnavailable) || time.Now().After(deadline) {
				return err
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	type done struct {
		user    string
		lane    bool // entered through a priority invite
		seq     int64
		admno   int64
		jti     string
		at, end int64
	}
	var (
		mu         sync.Mutex
		completed  = map[string]int{} // jti → first-time completions acknowledged
		doneList   []done
		killed     atomic.Bool
		failedOver = make(chan struct{})
	)
	var wg sync.WaitGroup
	for i := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := "u" + strconv.Itoa(i)
			is := replicas[i%3]
			time.Sleep(time.Duration(i) * 5 * time.Millisecond) // arrivals spread over 1.5 s
			lane := i%5 == 0
			var invite string
			if lane {
				inv, err := is.Invites(room, issuer.InviteOptions{User: user})
				if err != nil {
					t.Errorf("invite %s: %v", user, err)
					return
				}
				invite = inv[0].Token
			}
			for {
				var e *issuer.Entry
				enter := func() (err error) {
					if lane {
						e, err = is.EnterWithInvite(ctx, room, user, invite)
					} else {
						e, err = is.Enter(ctx, room, user)
					}
					return
				}
				if err := retry(enter); err != nil {
					t.Errorf("enter %s: %v", user, err)
					return
				}
				tok := e.WaitingToken
				for e.State == flashgate.StateWaiting {
					time.Sleep(20 * time.Millisecond)
					if err := retry(func() (err error) { e, err = is.Status(ctx, room, user, tok); return }); err != nil {
						t.Errorf("status %s: %v", user, err)
						return
					}
				}
				if e.State != flashgate.StateActive {
					continue // the entry was lost in the failover: queue again, as a client would
				}
				err := retry(func() (err error) { _, err = is.Exchange(ctx, room, user, tok); return })
				if errors.Is(err, flashgate.ErrNotAdmitted) || errors.Is(err, flashgate.ErrNotFound) || errors.Is(err, flashgate.ErrExpired) {
					continue // the admission was lost in the failover: queue again
				}
				if err != nil {
					t.Errorf("exchange %s: %v", user, err)
					return
				}
				var c *flashgate.Completion
				err = retry(func() (err error) { c, err = is.Complete(ctx, room, user, e.AdmissionID); return })
				if errors.Is(err, flashgate.ErrNotFound) || errors.Is(err, flashgate.ErrExpired) {
					continue // admission lost in the failover: refused, the buyer queues again
				}
				if err != nil {
					t.Errorf("complete %s: %v", user, err)
					return
				}
				mu.Lock()
				if !c.Repeated {
					completed[e.AdmissionID]++
				}
				doneList = append(doneList, done{user: user, lane: lane, seq: e.Arrival, admno: e.AdmissionNumber, jti: e.AdmissionID,
					at: e.AdmittedAt.UnixMilli(), end: c.CompletedAt.UnixMilli()})
				n := len(doneList)
				mu.Unlock()
				if n == users/3 && killed.CompareAndSwap(false, true) {
					set.Master.Kill()
					go func() {
						for ctx.Err() == nil {
							if err := rdb.Ping(ctx).Err(); err == nil {
								close(failedOver)
								return
							}
							time.Sleep(50 * time.Millisecond)
						}
					}()
				}
				return
			}
		}()
	}
	wg.Wait()
	require.True(t, killed.Load(), "the master was killed mid-sale")
	select {
	case <-failedOver:
	case <-time.After(30 * time.Second):
		t.Fatal("no failover")
	}
	assert.Contains(t, []string{set.Replicas[0].Addr, set.Replicas[1].Addr}, addrOf(t, rdb), "the client follows the promoted replica")

	require.Len(t, doneList, users, "every buyer completed one order")
	for jti, n := range completed {
		assert.Equal(t, 1, n, "admission %s completed more than once", jti)
	}
	byUser := map[string]int{}
	for _, d := range doneList {
		byUser[d.user]++
	}
	for u, n := range byUser {
		assert.Equal(t, 1, n, "user %s", u)
	}
	st, err := replicas[0].Stats(ctx, room)
	require.NoError(t, err)
	assert.LessOrEqual(t, st.PeakActive, int64(capacity))
	// FIFO: in admission order (admission time, then admission number — a
	// counter write lost in the failover may re-issue a number later),
	// arrival numbers only grow, except where a lost INCR re-issued one.
	sort.Slice(doneList, func(i, j int) bool {
		a, b := doneList[i], doneList[j]
		return a.at < b.at || a.at == b.at && a.admno < b.admno
	})
	require.NotNil(t, st.Lottery)
	require.True(t, st.Lottery.Drawn)
	var lastLane, lastPublic int64
	var drawn []int64
	for _, d := range doneList {
		switch {
		case d.lane:
			assert.LessOrEqual(t, lastLane, d.seq, "FIFO in the lane: %+v", d)
			lastLane = d.seq
		case d.seq > st.Lottery.Cutoff:
			assert.LessOrEqual(t, lastPublic, d.seq, "FIFO in the public line: %+v", d)
			lastPublic = d.seq
		default:
			assert.Zero(t, lastPublic, "the pre-queue after a later arrival: %+v", d)
			drawn = append(drawn, d.seq)
		}
	}
	assert.Equal(t, issuer.LotteryOrder(*st.Lottery, st.Epoch, drawn), drawn, "the pre-queue in the lottery's order")
	assert.Positive(t, st.PriorityAdmitted)
	t.Logf("failover: master %s → %s; completed %d, stats %+v", set.Master.Addr, addrOf(t, rdb), len(doneList), st)
}

// addrOf returns the address of the server the client talks to now.
func addrOf(t *testing.T, rdb *redis.Client) string {
	info, err := rdb.Info(context.Background(), "server").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\r\n") {
		if p, ok := strings.CutPrefix(line, "tcp_port:"); ok {
			return "127.0.0.1:" + p
		}
	}
	t.Fatal("no tcp_port in INFO server")
	return ""
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
