package faults_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
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
)

// shopper is what one user saw.
type shopper struct {
	user       string
	arrival    int64
	admission  int64
	ids        map[string]bool // admission ids seen
	completed  int             // successful Complete answers (first or repeated)
	firsts     int             // ... of which Repeated == false
	completeAt time.Time
	err        error
}

// TestReplicasUnderFaults runs three issuer replicas — each with its own
// client and its own Run loop — against one redis-server while 500 users
// enter, poll, and complete, and while the test injects SCRIPT FLUSH and
// CLIENT KILL TYPE normal (every replica's connections dropped, some in the
// middle of a script call: a lost reply) every 150 ms. Two replicas use
// go-redis's default retries; the third's client does not retry, so its
// dropped connections reach the caller as ErrUnavailable and the caller
// retries the whole operation. The rate (6000/min)
// makes the sale last several seconds, so the faults land mid-run.
//
// Afterwards, from what the users saw and from Redis itself: admission
// order equals arrival order (FIFO), peak_active ≤ capacity, each user was
// entered once and admitted once, and each admission completed at most once
// (a retried completion answers Repeated with the first time).
//
// What would make it fail: a tick that read its limits outside the script
// (replicas racing past capacity or the rate), an enter or complete that
// was not idempotent under go-redis's retry after a dropped connection
// (entered/admitted/completed counters above 500, a second admission id
// for a user), or a replica whose tick loop died on a connection error
// (users stuck waiting until the deadline).
func TestReplicasUnderFaults(t *testing.T) {
	const (
		users    = 500
		capacity = 40
		rate     = 6000
	)
	srv := redistest.Start(t)
	admin := srv.Client(t)
	var replicas []*issuer.Issuer
	for i := range 3 {
		// The third replica's client does not retry: a dropped connection
		// reaches the caller as ErrUnavailable, and the caller retries.
		retries := 0
		if i == 2 {
			retries = -1
		}
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 32, MaxRetries: retries})
		t.Cleanup(func() { _ = rdb.Close() })
		is, err := issuer.New(issuer.Config{Redis: rdb, WaitingSecret: secret, Logger: quiet})
		require.NoError(t, err)
		replicas = append(replicas, is)
	}
	room := redistest.Room("replicas")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	_, err := replicas[0].SetRoom(ctx, room, issuer.RoomConfig{Capacity: capacity, RatePerMinute: rate,
		SessionDuration: time.Minute, Tick: 100 * time.Millisecond, TickBatch: 25})
	require.NoError(t, err)
	for _, is := range replicas {
		runTicks(t, is)
	}

	// Faults, until every shopper is done.
	var done atomic.Int64
	var flushes, kills, faultsMidRun int
	faultsDone := make(chan struct{})
	stopFaults := make(chan struct{})
	go func() {
		defer close(faultsDone)
		for i := 0; ; i++ {
			select {
			case <-stopFaults:
				return
			case <-time.After(150 * time.Millisecond):
			}
			var err error
			if i%2 == 0 {
				err = admin.ScriptFlush(ctx).Err()
				if err == nil {
					flushes++
				}
			} else {
				var n int64
				n, err = admin.ClientKillByFilter(ctx, "TYPE", "normal").Result()
				if err == nil && n > 0 {
					kills++
				}
			}
			if err == nil && done.Load() < users {
				faultsMidRun++
			}
		}
	}()

	// retry calls f until it stops failing with ErrUnavailable (the one
	// answer that says "try again").
	var unavailable atomic.Int64
	retry := func(f func(is *issuer.Issuer) error) error {
		for {
			err := f(replicas[rand.IntN(len(replicas))])
			if err == nil || !errors.Is(err, flashgate.ErrUnavailable) || ctx.Err() != nil {
				return err
			}
			unavailable.Add(1)
			time.Sleep(time.Duration(5+rand.IntN(20)) * time.Millisecond)
		}
	}
	shoppers := make([]*shopper, users)
	var wg sync.WaitGroup
	for i := range shoppers {
		s := &shopper{user: fmt.Sprintf("u%04d", i), ids: map[string]bool{}}
		shoppers[i] = s
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer done.Add(1)
			time.Sleep(time.Duration(rand.IntN(500)) * time.Millisecond) // arrivals spread over 0.5 s
			s.err = s.shop(ctx, retry, room)
		}()
	}
	wg.Wait()
	close(stopFaults)
	<-faultsDone

	var failed []string
	for _, s := range shoppers {
		if s.err != nil && len(failed) < 5 {
			failed = append(failed, s.user+": "+s.err.Error())
		}
	}
	require.Empty(t, failed, "every user entered, was admitted and completed")
	lost := 0
	for _, s := range shoppers {
		if s.firsts == 0 {
			lost++ // the first completion's answer was lost and retried
		}
	}
	t.Logf("faults: %d SCRIPT FLUSH, %d CLIENT KILL (%d while users were still shopping); "+
		"%d calls answered ErrUnavailable and were retried; %d users never saw their first completion's answer",
		flushes, kills, faultsMidRun, unavailable.Load(), lost)
	assert.GreaterOrEqual(t, faultsMidRun, 6, "faults were injected mid-run")
	assert.GreaterOrEqual(t, flushes, 3)
	assert.GreaterOrEqual(t, kills, 3)

	// What the users saw.
	sort.Slice(shoppers, func(i, j int) bool { return shoppers[i].arrival < shoppers[j].arrival })
	arrivals := map[int64]string{}
	for i, s := range shoppers {
		assert.Len(t, s.ids, 1, "%s saw one admission id: %v", s.user, s.ids)
		assert.LessOrEqual(t, s.firsts, 1, "%s: one first completion at most", s.user)
		assert.Positive(t, s.completed, s.user)
		if other, dup := arrivals[s.arrival]; dup {
			t.Errorf("%s and %s share arrival %d", s.user, other, s.arrival)
		}
		arrivals[s.arrival] = s.user
		if i > 0 && s.admission <= shoppers[i-1].admission {
			t.Errorf("FIFO: %s (arrival %d) admitted as #%d, after %s (arrival %d) as #%d", s.user, s.arrival,
				s.admission, shoppers[i-1].user, shoppers[i-1].arrival, shoppers[i-1].admission)
		}
	}

	// What Redis recorded.
	st, err := replicas[1].Stats(context.Background(), room)
	require.NoError(t, err)
	t.Logf("stats: %+v", *st)
	assert.LessOrEqual(t, st.PeakActive, int64(capacity), "peak_active ≤ capacity")
	assert.EqualValues(t, users, st.Entered, "one entry per user")
	assert.EqualValues(t, users, st.Admitted, "one admission per user")
	assert.EqualValues(t, users, st.Completed, "one completion per admission")
	assert.Zero(t, st.Expired)
	assert.Zero(t, st.Waiting)
	assert.Zero(t, st.Active)

	// The admission log (60 s window: the whole run): one admission per
	// arrival, numbered in arrival order.
	admits, err := admin.ZRange(context.Background(), roomKey(room, "admits"), 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, admits, users)
	type adm struct{ seq, no int64 }
	var log []adm
	seqs := map[int64]bool{}
	for _, jti := range admits {
		id, ok := flashgate.ParseAdmissionID(jti)
		require.True(t, ok, jti)
		seq, no := id.Arrival, id.Number
		assert.False(t, seqs[seq], "arrival %d admitted twice", seq)
		seqs[seq] = true
		log = append(log, adm{seq, no})
	}
	slices.SortFunc(log, func(a, b adm) int { return int(a.seq - b.seq) })
	for i := 1; i < len(log); i++ {
		assert.Less(t, log[i-1].no, log[i].no, "FIFO in Redis: arrival %d before %d", log[i-1].seq, log[i].seq)
	}
	// One completion record per admission.
	ended, err := admin.ZRange(context.Background(), roomKey(room, "ended"), 0, -1).Result()
	require.NoError(t, err)
	completions := 0
	for _, k := range ended {
		if strings.HasPrefix(k, "C:") {
			completions++
		}
	}
	assert.Equal(t, users, completions)
}

// shop enters, polls until admitted, and completes (retrying completions
// whose answer was lost, as an order service would).
func (s *shopper) shop(ctx context.Context, retry func(func(*issuer.Issuer) error) error, room string) error {
	var e *issuer.Entry
	if err := retry(func(is *issuer.Issuer) (err error) {
		e, err = is.Enter(ctx, room, s.user)
		return err
	}); err != nil {
		return fmt.Errorf("enter: %w", err)
	}
	tok := e.WaitingToken
	s.arrival = e.Arrival
	for e.State == flashgate.StateWaiting {
		time.Sleep(time.Duration(50+rand.IntN(100)) * time.Millisecond)
		if err := retry(func(is *issuer.Issuer) (err error) {
			e, err = is.Status(ctx, room, s.user, tok)
			return err
		}); err != nil {
			return fmt.Errorf("status: %w", err)
		}
	}
	if e.State != flashgate.StateActive {
		return fmt.Errorf("state %s, want ACTIVE", e.State)
	}
	if e.Arrival != s.arrival {
		return fmt.Errorf("arrival changed from %d to %d", s.arrival, e.Arrival)
	}
	s.ids[e.AdmissionID] = true
	s.admission = e.AdmissionNumber
	time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond) // shopping
	// Complete twice on purpose: the second is a client retry.
	for range 2 {
		var c *flashgate.Completion
		if err := retry(func(is *issuer.Issuer) (err error) {
			c, err = is.Complete(ctx, room, s.user, e.AdmissionID)
			return err
		}); err != nil {
			return fmt.Errorf("complete: %w", err)
		}
		if s.completed > 0 && !c.CompletedAt.Equal(s.completeAt) {
			return fmt.Errorf("completion time changed from %v to %v", s.completeAt, c.CompletedAt)
		}
		s.completeAt = c.CompletedAt
		s.completed++
		if !c.Repeated {
			s.firsts++
		}
	}
	return nil
}
