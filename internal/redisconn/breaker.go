package redisconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrDown is the error of every command a Breaker refuses while Redis is
// known down (wrapped with the failure that opened it). The issuer answers
// it like any Redis failure: ErrUnavailable, 503 with Retry-After.
var ErrDown = errors.New("redis down (circuit breaker open; failing fast until a probe answers)")

// Breaker defaults.
const (
	DefaultThreshold    = 3
	DefaultProbeEvery   = 250 * time.Millisecond
	DefaultProbeTimeout = 250 * time.Millisecond
)

// BreakerOptions configures a Breaker; zero values take the defaults.
type BreakerOptions struct {
	// Threshold is how many consecutive connection-level failures open the
	// breaker (default 3). Any answer from Redis resets the count.
	Threshold int
	// ProbeEvery is the pause between two probes (PING) while open
	// (default 250 ms).
	ProbeEvery time.Duration
	// ProbeTimeout bounds one probe (default 250 ms).
	ProbeTimeout time.Duration
	// Logger receives the state changes, one line each: WARN "redis down"
	// with the cause, INFO "redis up" with the downtime. Nil: slog.Default().
	Logger *slog.Logger
}

// Breaker is a circuit breaker in front of a go-redis client (a redis.Hook;
// see Protect). While Redis answers it only watches. Consecutive
// connection-level failures — a refused, reset or timed-out connection,
// EOF, and the replies of a server that cannot serve anyone yet (LOADING,
// NOAUTH, WRONGPASS, max clients) — open it; Redis's answers to a command
// (NOSCRIPT, OOM, WRONGTYPE, script errors) are answers, and never do. While
// open, commands fail at once with ErrDown, without waiting for go-redis's
// dial and retry loops (each of which takes seconds against a dead server),
// and the commands in flight when it opened are cut short the same way. A
// background probe (PING every ProbeEvery) closes it when Redis answers again.
//
// On a Cluster each node has its own breaker (a node down does not fail the
// rooms of the others); Up is false while any of them is open.
type Breaker struct {
	threshold            int32
	probeEvery, probeMax time.Duration
	log                  *slog.Logger

	open     atomic.Int64 // nodes whose breaker is open
	failures atomic.Uint64
	rejected atomic.Uint64

	mu      sync.Mutex // guards stopped and probes.Add against Close
	stopped bool
	stop    chan struct{}
	probes  sync.WaitGroup
}

// Protect installs a Breaker on rdb (a *redis.Client, including the
// Sentinel failover client, or a *redis.ClusterClient, node by node) and
// returns it. Close it to stop its probes.
func Protect(rdb redis.UniversalClient, o BreakerOptions) *Breaker {
	b := &Breaker{threshold: int32(o.Threshold), probeEvery: o.ProbeEvery, probeMax: o.ProbeTimeout,
		log: o.Logger, stop: make(chan struct{})}
	if b.threshold <= 0 {
		b.threshold = DefaultThreshold
	}
	if b.probeEvery <= 0 {
		b.probeEvery = DefaultProbeEvery
	}
	if b.probeMax <= 0 {
		b.probeMax = DefaultProbeTimeout
	}
	if b.log == nil {
		b.log = slog.Default()
	}
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		c.OnNewNode(func(n *redis.Client) { n.AddHook(b.node(n.Options().Addr, n.Ping)) })
	case *redis.Client:
		c.AddHook(b.node(c.Options().Addr, c.Ping))
	default:
		rdb.AddHook(b.node(fmt.Sprintf("%T", rdb), rdb.Ping))
	}
	return b
}

// Up reports whether Redis is believed reachable (no breaker open).
func (b *Breaker) Up() bool { return b.open.Load() == 0 }

// Failures counts the connection-level failures seen.
func (b *Breaker) Failures() uint64 { return b.failures.Load() }

// Rejected counts the commands failed fast, unsent, while open.
func (b *Breaker) Rejected() uint64 { return b.rejected.Load() }

// Close stops the probes (the hooks stay installed).
func (b *Breaker) Close() {
	b.mu.Lock()
	if !b.stopped {
		b.stopped = true
		close(b.stop)
	}
	b.mu.Unlock()
	b.probes.Wait()
}

// startProbe counts a probe goroutine about to start; false once closed.
func (b *Breaker) startProbe() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return false
	}
	b.probes.Add(1)
	return true
}

// probeKey marks a probe's context: the hooks let probes through.
type probeKey struct{}

func isProbe(ctx context.Context) bool { return ctx.Value(probeKey{}) != nil }

// node is the breaker of one Redis server (the redis.Hook).
type node struct {
	b    *Breaker
	addr string
	ping func(context.Context) *redis.StatusCmd

	fails atomic.Int32               // consecutive connection-level failures
	down  atomic.Pointer[outage]     // nil while closed
	gen   atomic.Pointer[generation] // cancelled when the breaker opens
	mu    sync.Mutex                 // serialises opening and closing
}

// outage is one open period.
type outage struct {
	since    time.Time
	err      error // ErrDown with the cause
	rejected atomic.Uint64
}

// generation is cancelled when the breaker opens: the commands in flight
// then give up at once instead of finishing their dial and retry loops.
type generation struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func newGeneration() *generation {
	ctx, cancel := context.WithCancel(context.Background())
	return &generation{ctx: ctx, cancel: cancel}
}

func (b *Breaker) node(addr string, ping func(context.Context) *redis.StatusCmd) *node {
	n := &node{b: b, addr: addr, ping: ping}
	n.gen.Store(newGeneration())
	return n
}

// outcome is what one command or dial says about Redis.
type outcome int

const (
	neutral  outcome = iota // nothing (the caller gave up, the client is closed)
	answered                // Redis answered: it is up
	failed                  // a connection-level failure
)

// classify sorts err, the result of a command whose caller's context is still live.
func classify(err error) outcome {
	switch {
	case err == nil, errors.Is(err, redis.Nil):
		return answered
	case errors.Is(err, ErrDown), errors.Is(err, redis.ErrClosed), errors.Is(err, context.Canceled):
		return neutral
	}
	var reply redis.Error
	if errors.As(err, &reply) {
		msg := reply.Error()
		for _, p := range []string{"LOADING", "NOAUTH", "WRONGPASS", "ERR max number of clients"} {
			if strings.HasPrefix(msg, p) {
				return failed // the server is there but serves nobody (yet)
			}
		}
		return answered
	}
	// EOF, connection refused or reset, i/o and dial timeouts, pool timeout.
	return failed
}

// record counts one outcome.
func (n *node) record(o outcome, err error) {
	switch o {
	case answered:
		if n.fails.Load() != 0 {
			n.fails.Store(0)
		}
	case failed:
		n.b.failures.Add(1)
		if n.fails.Add(1) >= n.b.threshold {
			n.trip(err)
		}
	}
}

// rejection returns the error for a command while open, or nil while closed.
func (n *node) rejection() error {
	o := n.down.Load()
	if o == nil {
		return nil
	}
	o.rejected.Add(1)
	n.b.rejected.Add(1)
	return o.err
}

// trip opens the breaker (once per outage), cuts the commands in flight
// short, logs, and starts probing.
func (n *node) trip(cause error) {
	n.mu.Lock()
	if n.down.Load() != nil {
		n.mu.Unlock()
		return
	}
	if !n.b.startProbe() { // closed: no probe would close it again
		n.mu.Unlock()
		return
	}
	o := &outage{since: time.Now(), err: fmt.Errorf("%w: %v", ErrDown, cause)}
	n.down.Store(o)
	n.b.open.Add(1)
	n.mu.Unlock()
	n.b.log.Warn("redis down: commands fail fast until a probe answers", "addr", n.addr, "err", cause,
		"consecutive_failures", n.fails.Load(), "probe_every", n.b.probeEvery.String())
	n.gen.Load().cancel()
	go n.probe(o)
}

// probe PINGs until Redis answers, then closes the breaker.
func (n *node) probe(o *outage) {
	defer n.b.probes.Done()
	t := time.NewTimer(n.b.probeEvery)
	defer t.Stop()
	ctx := context.WithValue(context.Background(), probeKey{}, true)
	for {
		select {
		case <-n.b.stop:
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, n.b.probeMax)
		err := n.ping(pctx).Err()
		cancel()
		if err == nil || errors.Is(err, redis.ErrClosed) {
			n.reset(o, err == nil)
			return
		}
		t.Reset(n.b.probeEvery)
	}
}

// reset closes the breaker after an outage (logged when Redis answered;
// silent when the client was closed).
func (n *node) reset(o *outage, up bool) {
	if up {
		n.b.log.Info("redis up", "addr", n.addr, "down_for", time.Since(o.since).Round(time.Millisecond).String(),
			"failed_fast", o.rejected.Load())
	}
	n.mu.Lock()
	n.gen.Store(newGeneration())
	n.fails.Store(0)
	n.down.Store(nil)
	n.b.open.Add(-1)
	n.mu.Unlock()
}

// guard derives the context a command runs under: cancelled when the
// breaker opens. Its done reports whether that is what ended the command.
func (n *node) guard(ctx context.Context) (context.Context, guarded) {
	g := n.gen.Load()
	if ctx.Done() == nil {
		// A caller context that never ends (Background, WithoutCancel: what
		// flashgate's handlers and enter batches pass) needs no cancel
		// context registered with the generation: the generation's own
		// cancellation is the command's.
		return linked{ctx, g}, guarded{g: g}
	}
	cctx, cancel := context.WithCancel(ctx)
	return cctx, guarded{g: g, cancel: cancel, stop: context.AfterFunc(g.ctx, cancel)}
}

// guarded is a command's link to the generation it started in.
type guarded struct {
	g      *generation
	cancel context.CancelFunc // nil for a linked context
	stop   func() bool
}

// done releases the link and reports whether the breaker opened meanwhile.
func (gd guarded) done() (tripped bool) {
	if gd.cancel == nil {
		return gd.g.ctx.Err() != nil
	}
	tripped = !gd.stop() && gd.g.ctx.Err() != nil
	gd.cancel()
	return tripped
}

// linked is a command context with the values of a caller's context that
// never ends and the cancellation of a generation.
type linked struct {
	context.Context
	g *generation
}

func (c linked) Done() <-chan struct{} { return c.g.ctx.Done() }
func (c linked) Err() error            { return c.g.ctx.Err() }

// AfterFunc lets contexts derived from c (go-redis's dial timeouts) follow
// its cancellation without a goroutine each (package context looks for it).
func (c linked) AfterFunc(f func()) func() bool { return context.AfterFunc(c.g.ctx, f) }

// settle turns the result of a command into its final error and records
// it: a command the opening breaker cut short fails with ErrDown. A caller
// that gave up says nothing about Redis — unless its deadline ran out after
// the command had waited at least the probe timeout: then Redis let a whole
// request budget go by without an answer (a hung server, SIGSTOP), which is
// as telling as a read timeout, and callers with deadlines shorter than
// go-redis's read timeout would otherwise keep the breaker from ever opening.
func (n *node) settle(ctx context.Context, err error, tripped bool, start time.Time) error {
	switch {
	case err == nil:
		n.record(answered, nil)
	case tripped && ctx.Err() == nil:
		if o := n.down.Load(); o != nil {
			return o.err
		}
		return ErrDown
	case ctx.Err() == nil:
		n.record(classify(err), err)
	case errors.Is(ctx.Err(), context.DeadlineExceeded) && time.Since(start) >= n.b.probeMax:
		n.record(failed, err)
	}
	return err
}

func (n *node) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		// Each failed dial attempt counts (go-redis tries several per
		// connection): against a dead server the breaker opens within the
		// first command's dial loop. A dial timeout ends the attempt's own
		// context, so only a cancellation is the caller giving up.
		if err != nil && !isProbe(ctx) && !errors.Is(err, context.Canceled) && n.down.Load() == nil {
			n.record(failed, err)
		}
		return conn, err
	}
}

func (n *node) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isProbe(ctx) {
			return next(ctx, cmd)
		}
		if err := n.rejection(); err != nil {
			cmd.SetErr(err)
			return err
		}
		start := time.Now()
		cctx, gd := n.guard(ctx)
		err := next(cctx, cmd)
		if final := n.settle(ctx, err, gd.done(), start); final != err {
			cmd.SetErr(final)
			err = final
		}
		return err
	}
}

func (n *node) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if isProbe(ctx) {
			return next(ctx, cmds)
		}
		if err := n.rejection(); err != nil {
			for _, c := range cmds {
				c.SetErr(err)
			}
			return err
		}
		start := time.Now()
		cctx, gd := n.guard(ctx)
		err := next(cctx, cmds)
		if final := n.settle(ctx, err, gd.done(), start); final != err {
			for _, c := range cmds {
				if c.Err() != nil {
					c.SetErr(final)
				}
			}
			err = final
		}
		return err
	}
}
