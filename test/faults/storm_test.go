package faults_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/ctxtime"
	"github.com/flashgate/flashgate/internal/testing/redistest"
)

// The storm's room and run, scaled so admissions turn over within seconds:
// the capacity binds (abandoned admissions hold their place for a whole
// session), the queue outlasts the run, and the fault lands mid-sale.
const (
	stormCapacity = 25
	stormRate     = 600 // per minute: 10 admissions/s
	stormSession  = 6 * time.Second
	stormTick     = 200 * time.Millisecond
	stormAdmin    = "storm-admin-token-of-32-bytes-min"
	stormDrain    = 4 * time.Second // completions under way at the end are settled within this
)

// stormConfig is the size of every scenario's run; FLASHGATE_STORM_DURATION
// (a Go duration) and FLASHGATE_STORM_BUYERS make it longer or larger.
type stormConfig struct {
	duration time.Duration
	buyers   int
}

func stormConfigFromEnv(t *testing.T) stormConfig {
	c := stormConfig{duration: 12 * time.Second, buyers: 250}
	if testing.Short() {
		c = stormConfig{duration: 8 * time.Second, buyers: 150}
	}
	if v := os.Getenv("FLASHGATE_STORM_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "FLASHGATE_STORM_DURATION")
		require.GreaterOrEqual(t, d, 8*time.Second, "FLASHGATE_STORM_DURATION: the faults need at least 8 s")
		c.duration = d
	}
	if v := os.Getenv("FLASHGATE_STORM_BUYERS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "FLASHGATE_STORM_BUYERS")
		require.Positive(t, n, "FLASHGATE_STORM_BUYERS")
		c.buyers = n
	}
	return c
}

// faultEnv is what a fault may act on, and where it records what it did.
type faultEnv struct {
	ctx      context.Context
	redis    *redistest.Server
	rdb      *redis.Client // admin connection for CONFIG, SCRIPT, INFO
	replicas []*replica
	start    time.Time
	end      time.Time // the storm's end: faults are over well before

	mu         sync.Mutex
	notes      []string
	restartAt  time.Time // data loss: the empty server is being started
	restoredAt time.Time // … and answers
}

func (f *faultEnv) note(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notes = append(f.notes, fmt.Sprintf("t=%.2fs ", time.Since(f.start).Seconds())+fmt.Sprintf(format, args...))
}

// stormFault is one scenario: how Redis is started and what happens mid-run.
type stormFault struct {
	name      string
	redisArgs []string
	dataLoss  bool
	// sharedSecret: no FLASHGATE_WAITING_SECRET; the replicas share the
	// waiting-token secret through Redis (fg:waiting-secret).
	sharedSecret bool
	// at is when the fault starts, as a share of the run (default 1/3).
	at     float64
	inject func(f *faultEnv) // nil: no fault
}

func stormFaults() []stormFault {
	killRestart := func(f *faultEnv) {
		f.note("SIGKILL redis-server")
		f.redis.Kill()
		ctxtime.Sleep(f.ctx, 500*time.Millisecond)
		f.restartAt = time.Now()
		if err := f.redis.Restart(); err != nil {
			f.note("restart failed: %v", err)
			return
		}
		f.restoredAt = time.Now()
		f.note("redis-server restarted")
	}
	return []stormFault{
		{name: "none"},
		// Early, so that tokens minted before the loss are still being
		// completed while the new line's first arrivals (the same numbers)
		// complete.
		{name: "redis-kill-aof", redisArgs: []string{"--appendonly", "yes"}, at: 1.0 / 6, inject: killRestart},
		{name: "redis-kill-lost", dataLoss: true, at: 1.0 / 6, inject: killRestart},
		// The waiting-token secret lives in Redis and is lost with it; a
		// replica restarts right after the loss, while the other runs on
		// with the old secret: they must agree on one again, and nobody's own
		// token may read as someone else's (token_owner_mismatch).
		{name: "redis-kill-lost-shared-secret", dataLoss: true, sharedSecret: true, at: 1.0 / 6, inject: func(f *faultEnv) {
			r := f.replicas[1]
			f.note("SIGKILL %s", r.name)
			r.kill()
			killRestart(f)
			if err := r.start(); err != nil {
				f.note("%s restart failed: %v", r.name, err)
				return
			}
			f.note("%s restarted after the loss", r.name)
		}},
		{name: "replica-kill", inject: func(f *faultEnv) {
			r := f.replicas[1]
			f.note("SIGKILL %s", r.name)
			r.kill()
			ctxtime.Sleep(f.ctx, 2*time.Second)
			if err := r.start(); err != nil {
				f.note("%s restart failed: %v", r.name, err)
				return
			}
			f.note("%s restarted", r.name)
		}},
		{name: "redis-sigstop", inject: func(f *faultEnv) {
			pid, err := redisPID(f.ctx, f.rdb)
			if err != nil {
				f.note("no redis pid: %v", err)
				return
			}
			f.note("SIGSTOP redis-server (pid %d)", pid)
			_ = syscall.Kill(pid, syscall.SIGSTOP)
			defer func() { _ = syscall.Kill(pid, syscall.SIGCONT) }()
			ctxtime.Sleep(context.Background(), 5*time.Second)
			_ = syscall.Kill(pid, syscall.SIGCONT)
			f.note("SIGCONT redis-server")
		}},
		{name: "script-flush", inject: func(f *faultEnv) {
			n := 0
			f.note("SCRIPT FLUSH every 100 ms from now")
			for time.Until(f.end) > 2*time.Second && ctxtime.Sleep(f.ctx, 100*time.Millisecond) {
				if f.rdb.ScriptFlush(f.ctx).Err() == nil {
					n++
				}
			}
			f.note("stopped after %d SCRIPT FLUSH", n)
		}},
		{name: "redis-maxmemory", inject: func(f *faultEnv) {
			used, err := redisInt(f.ctx, f.rdb, "memory", "used_memory")
			if err != nil {
				f.note("INFO memory: %v", err)
				return
			}
			limit := used / 2
			if err := f.rdb.ConfigSet(f.ctx, "maxmemory", strconv.FormatInt(limit, 10)).Err(); err != nil {
				f.note("CONFIG SET maxmemory: %v", err)
				return
			}
			f.note("maxmemory %d bytes (used_memory %d; policy noeviction: writes refused)", limit, used)
			ctxtime.Sleep(f.ctx, 3*time.Second)
			if err := f.rdb.ConfigSet(context.Background(), "maxmemory", "0").Err(); err != nil {
				f.note("restoring maxmemory: %v", err)
				return
			}
			f.note("maxmemory restored (0: no limit)")
		}},
	}
}

// TestStorm is the client-side storm (the load that once broke invariant 7): two issuer replicas (real
// `flashgate serve` processes) over one redis-server, a few hundred buyers
// entering, polling, exchanging and completing (or walking away) through
// both, once without a fault and once with each fault injected mid-run. The
// invariants are checked only from what the buyers saw (storm_check_test.go):
// FIFO within an epoch, live admissions ≤ capacity, admissions per 60 s ≤
// rate, one completion per admission and none for someone else's purchase,
// no 500s, every 503 with Retry-After and fast, no owner mismatch for one's
// own token, nothing lost but with the data — and after a data loss,
// nothing minted before it completes or reads as waiting.
//
// Each scenario prints a summary (requests by status, admitted, completed,
// max live vs capacity, max per 60 s vs rate, FIFO, violations with
// examples); the end of the test prints one line per scenario.
func TestStorm(t *testing.T) {
	cfg := stormConfigFromEnv(t)
	dir := t.TempDir()
	bin := buildFlashgate(t, dir)
	keysFile := filepath.Join(dir, "keys.json")
	out, err := exec.Command(bin, "keys", "generate", "-file", keysFile).CombinedOutput()
	require.NoError(t, err, "flashgate keys generate: %s", out)

	var outcomes []*outcome
	began := time.Now()
	for i, f := range stormFaults() {
		t.Run(f.name, func(t *testing.T) {
			o := runStorm(t, cfg, bin, keysFile, f, uint64(i))
			outcomes = append(outcomes, o)
		})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "storm: %d scenarios of %s with %d buyers in %s\n", len(outcomes), cfg.duration, cfg.buyers,
		time.Since(began).Round(100*time.Millisecond))
	for _, o := range outcomes {
		b.WriteString(o.line() + "\n")
	}
	t.Log("\n" + b.String())
}

func runStorm(t *testing.T, cfg stormConfig, bin, keysFile string, f stormFault, seed uint64) *outcome {
	srv := redistest.Start(t, f.redisArgs...)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, DialTimeout: time.Second, ReadTimeout: 2 * time.Second,
		WriteTimeout: 2 * time.Second, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })

	dir := t.TempDir()
	env := []string{
		"REDIS_URL=redis://" + srv.Addr + "/0",
		"FLASHGATE_KEYS_FILE=" + keysFile,
		"FLASHGATE_ADMIN_TOKEN=" + stormAdmin,
		// A room lost with the data comes back with the same policy on the
		// next enter.
		"FLASHGATE_DEFAULT_ROOM=open",
		"FLASHGATE_DEFAULT_CAPACITY=" + strconv.Itoa(stormCapacity),
		"FLASHGATE_DEFAULT_RATE_PER_MINUTE=" + strconv.Itoa(stormRate),
		"FLASHGATE_DEFAULT_SESSION=" + stormSession.String(),
		"FLASHGATE_DEFAULT_TICK=" + stormTick.String(),
		// The storm is about faults, not the per-user limits (its buyers
		// poll 8 times faster than the hint, up to 100 statuses per 10 s).
		"FLASHGATE_ENTER_PER_USER=0",
		"FLASHGATE_STATUS_PER_USER=0",
		"FLASHGATE_EXCHANGE_PER_USER=0",
		"FLASHGATE_COMPLETE_PER_USER=0",
		"FLASHGATE_SHUTDOWN_TIMEOUT=2s",
		"FLASHGATE_LOG_LEVEL=warn",
	}
	if !f.sharedSecret {
		env = append(env, "FLASHGATE_WAITING_SECRET="+base64.StdEncoding.EncodeToString(secret))
	}
	var replicas []*replica
	for i := range 2 {
		r := &replica{name: fmt.Sprintf("replica %d", i), bin: bin,
			addr: "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t)), log: filepath.Join(dir, fmt.Sprintf("replica%d.log", i))}
		r.env = append(append([]string(nil), env...), "FLASHGATE_ADDR="+r.addr)
		require.NoError(t, r.start())
		t.Cleanup(r.stop)
		replicas = append(replicas, r)
	}

	// Two products on sale at once, with ids of the same length: what one
	// request leaves in a reused buffer is then another room's id (invariant 7).
	rooms := []string{redistest.Room("storm-a"), redistest.Room("storm-b")}
	hc := newStormClient()
	for _, room := range rooms {
		body := fmt.Sprintf(`{"capacity":%d,"rate_per_minute":%d,"session_ms":%d,"tick_ms":%d}`,
			stormCapacity, stormRate, stormSession.Milliseconds(), stormTick.Milliseconds())
		req, err := http.NewRequest(http.MethodPut, replicas[0].base()+"/admin/rooms/"+room, bytes.NewBufferString(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+stormAdmin)
		req.Header.Set("Content-Type", "application/json")
		res, err := hc.Do(req)
		require.NoError(t, err)
		_ = res.Body.Close()
		require.Equal(t, http.StatusCreated, res.StatusCode, "PUT /admin/rooms/%s", room)
	}

	// A buyer's requests are bounded in count as well as in time: a poll
	// every 100 ms at most, a retry every 20 ms at most.
	s := &storm{rooms: rooms, hc: hc, maxRequests: max(400, int(cfg.duration/(30*time.Millisecond)))}
	for _, r := range replicas {
		s.bases = append(s.bases, r.base())
	}
	start := time.Now().Add(50 * time.Millisecond)
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(cfg.duration))
	defer cancel()
	drain, cancelDrain := context.WithDeadline(context.Background(), start.Add(cfg.duration+stormDrain))
	defer cancelDrain()

	rng := rand.New(rand.NewPCG(seed, 0x5707))
	buyers := make([]*buyer, cfg.buyers)
	// Half the buyers arrive in a burst when the sale opens (the first
	// twelfth of the run), the others over the next half of it: the line is
	// long from the start, and enters keep coming while others complete.
	arrival := func() time.Duration {
		if rng.IntN(2) == 0 {
			return time.Duration(rng.Int64N(int64(cfg.duration / 12)))
		}
		return cfg.duration/12 + time.Duration(rng.Int64N(int64(cfg.duration/2)))
	}
	for i := range buyers {
		buyers[i] = &buyer{user: fmt.Sprintf("b%04d", i), room: i % len(rooms), abandon: rng.Float64() < abandonShare,
			repeat: rng.Float64() < repeatShare, returns: rng.Float64() < returnShare,
			think:  thinkMin + time.Duration(rng.Int64N(int64(thinkMax-thinkMin))),
			arrive: arrival(),
			rng:    rand.New(rand.NewPCG(seed, uint64(i))), complete: map[string]int{}}
	}
	var wg sync.WaitGroup
	for _, b := range buyers {
		wg.Add(1)
		go func() { defer wg.Done(); s.shop(ctx, drain, b, start) }()
	}

	fe := &faultEnv{ctx: drain, redis: srv, rdb: rdb, replicas: replicas, start: start, end: start.Add(cfg.duration)}
	faultDone := make(chan struct{})
	go func() {
		defer close(faultDone)
		at := f.at
		if at == 0 {
			at = 1.0 / 3
		}
		if f.inject != nil && ctxtime.Sleep(ctx, time.Until(start.Add(time.Duration(float64(cfg.duration)*at)))) {
			f.inject(fe)
		}
	}()
	wg.Wait()
	<-faultDone

	spec := stormSpec{name: f.name, rooms: rooms, capacity: stormCapacity, rate: stormRate, session: stormSession,
		start: start, dataLoss: f.dataLoss, restartAt: fe.restartAt, restoredAt: fe.restoredAt}
	if f.dataLoss && fe.restoredAt.IsZero() {
		t.Fatalf("the data-loss fault did not complete: %v", fe.notes)
	}
	o := check(spec, buyers)
	o.faults = fe.notes
	for _, r := range replicas {
		n, ex := r.errorLines(2)
		o.replicaErrs += n
		o.replicaLines = append(o.replicaLines, ex...)
	}
	t.Logf("\n%s", o.summary())
	for _, k := range violationOrder {
		if o.count[k] > 0 {
			t.Errorf("VIOLATION %s: %d (examples above)", k, o.count[k])
		}
	}
	if o.admitted < minAdmittedBase {
		t.Errorf("the storm admitted only %d (want ≥ %d): it tested too little", o.admitted, minAdmittedBase)
	}
	return o
}
