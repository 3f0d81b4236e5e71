package restore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/cmd/flashgate/internal/restore"
	"github.com/flashgate/flashgate/internal/simulate"
	"github.com/flashgate/flashgate/internal/testing/pgtest"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/journal"
	"github.com/flashgate/flashgate/journal/consumer"
	"github.com/flashgate/flashgate/keys"
	"github.com/flashgate/flashgate/server"
)

// freezer is a go-redis hook that holds every command of its client while
// frozen (until the command's context ends): the issuer then writes nothing,
// as if its process were stopped.
type freezer struct {
	mu     sync.Mutex
	thawed chan struct{} // nil while not frozen
}

func (f *freezer) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.thawed == nil {
		f.thawed = make(chan struct{})
	}
}

func (f *freezer) thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.thawed != nil {
		close(f.thawed)
		f.thawed = nil
	}
}

func (f *freezer) wait(ctx context.Context) error {
	f.mu.Lock()
	ch := f.thawed
	f.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *freezer) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f *freezer) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := f.wait(ctx); err != nil {
			return err
		}
		return next(ctx, cmd)
	}
}
func (f *freezer) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if err := f.wait(ctx); err != nil {
			return err
		}
		return next(ctx, cmds)
	}
}

// TestSaleSurvivesRedisLoss (issue 12, docs/operations.md#durability): a sale on a
// real redis-server with the journal running; mid-sale redis-server is
// killed with SIGKILL (no persistence) and restarted empty; the issuer,
// under FLASHGATE_LOST_ROOMS=await-restore, answers 503 room_lost meanwhile
// (the buyers retry, as clients do); `flashgate restore` (cmd/flashgate/internal/restore)
// rebuilds the room from the journal; the sale finishes. The simulator's
// checks hold across the loss — FIFO in each lane, capacity, rate, no double
// admission, no double order, no forged token — and nobody lost their place.
//
// The crash is placed where the journal has caught up: the issuer is frozen
// (its Redis client holds every command) until the consumer's lag is 0, then
// Redis is killed. What a crash inside the lag loses is docs/operations.md
// "Redis persistence, and what a loss can cost"; this test is about restoring what was journaled.
func TestSaleSurvivesRedisLoss(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	dsn := pgtest.Start(t).NewDatabase(t)
	require.NoError(t, journal.Migrate(ctx, dsn))
	store, err := journal.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(store.Close)

	// The issuer: its own client, frozen on demand; a configured waiting
	// secret (not one kept in Redis, which the crash loses).
	frz := &freezer{}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 64})
	rdb.AddHook(frz)
	t.Cleanup(func() { _ = rdb.Close() })
	ring, err := keys.Generate(time.Now())
	require.NoError(t, err)
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	is, err := issuer.New(issuer.Config{Redis: rdb, Signer: ring, WaitingSecret: secret,
		LostRooms: issuer.LostRoomsAwaitRestore})
	require.NoError(t, err)
	hs, err := server.New(server.Options{Issuer: is, Keys: ring, AdminToken: "admin", Logger: quiet()})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = hs.Listen(ln) }()
	t.Cleanup(func() { _ = hs.Shutdown(context.Background()) })
	tctx, stopTick := context.WithCancel(ctx)
	ticked := make(chan struct{})
	go func() { defer close(ticked); _ = is.Run(tctx) }()
	t.Cleanup(func() { stopTick(); <-ticked })

	// The journal process: its own client, never frozen.
	jrdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = jrdb.Close() })
	jc, err := consumer.New(consumer.Config{Redis: jrdb, Store: store, Idle: 20 * time.Millisecond, Logger: quiet()})
	require.NoError(t, err)
	jctx, stopJournal := context.WithCancel(ctx)
	journaled := make(chan struct{})
	go func() { defer close(journaled); _ = jc.Run(jctx) }()
	t.Cleanup(func() { stopJournal(); <-journaled })

	room := redistest.Room("durable")
	o := saleOptions()
	o.Users, o.Capacity, o.RatePerMinute = 600, 40, 3000
	o.SessionDuration, o.Think = 10*time.Second, 400*time.Millisecond
	o.IssuerURL, o.AdminToken, o.Room = "http://"+ln.Addr().String(), "admin", room
	o.RetryFor = time.Minute // through the outage and the restore, as a client retries
	o.Ramp = 4 * time.Second

	// The crash, once a third of the buyers were admitted.
	crashed := make(chan error, 1)
	var restored issuer.RestoreResult
	go func() {
		crashed <- func() error {
			for {
				n, _ := jrdb.HGet(ctx, "fg:{"+room+"}:stats", "admitted").Int()
				if n >= o.Users/3 {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			frz.freeze()
			time.Sleep(100 * time.Millisecond) // scripts in flight finish
			for {
				g, err := jrdb.XInfoGroups(ctx, consumer.StreamKey(room)).Result()
				if err != nil {
					return err
				}
				if len(g) == 1 && g[0].Lag == 0 && g[0].Pending == 0 {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			srv.Kill()
			if err := srv.Restart(); err != nil {
				return err
			}
			frz.thaw() // the issuer finds the room lost: 503 room_lost
			time.Sleep(300 * time.Millisecond)
			res, err := restore.Room(ctx, store, jrdb, room, time.Now())
			restored = res
			return err
		}()
	}()

	r, err := simulate.Run(ctx, o)
	require.NoError(t, err)
	require.NoError(t, <-crashed, "crash and restore")
	var text bytes.Buffer
	require.NoError(t, r.WriteText(&text))
	t.Logf("restored: %+v\n%s", restored, text.String())

	assert.Greater(t, restored.Waiting+restored.Live, 0, "the crash came mid-sale: the restore had a line to rebuild")
	assert.True(t, r.OK, "violations %v, errors %v", r.Violations, r.ErrorSamples)
	assert.Zero(t, r.PlacesLost, "nobody lost their place")
	assert.Zero(t, r.Errors)
	assert.Zero(t, r.FIFOViolations)
	assert.Zero(t, r.DoubleAdmissions)
	assert.Zero(t, r.DoubleCompletions)
	assert.Zero(t, r.ForgedAccepted)
	assert.LessOrEqual(t, r.PeakActive, o.Capacity)
	assert.LessOrEqual(t, r.MaxAdmittedPerMinute, o.RatePerMinute)
	assert.Equal(t, o.Users-r.Abandoned, r.Completed, "every buyer meant to order did, once")
	assert.Equal(t, int64(r.Completed), r.Server.Completed, "the restored counters add up")

	// The journal saw the whole sale, across the loss.
	require.Eventually(t, func() bool {
		rep, err := store.Report(ctx, room, "")
		return err == nil && rep.Completed == int64(r.Completed)
	}, 10*time.Second, 50*time.Millisecond, "every completion journaled")
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// saleOptions is a small sale (internal/simulate's tests run the same).
func saleOptions() simulate.Options {
	return simulate.Options{Users: 300, Capacity: 20, RatePerMinute: 6000, SessionDuration: 5 * time.Second,
		Tick: 100 * time.Millisecond, Think: 100 * time.Millisecond, Abandon: 0.02, BadActors: 0.05, PollScale: 0.2,
		Timeout: 3 * time.Minute, Seed: 42}
}
