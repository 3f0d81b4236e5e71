// Package consumer is the journal process's core (`flashgate journal run`,
// docs/operations.md#the-journal-process): it reads every room's journal stream from
// Redis with the consumer group flashgate-journal and writes it to the
// journal in PostgreSQL (package journal's Store). It lives apart from
// package journal so that the store's users (queries, restore) do not
// depend on go-redis or Prometheus (architecture_test.go).
package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/ctxtime"
	"github.com/flashgate/flashgate/internal/roomkey"
	"github.com/flashgate/flashgate/journal"
)

// Group is the consumer group every journal process reads the rooms'
// streams with (the issue 12 contract): several processes share the work,
// each stream entry goes to one of them.
const Group = "flashgate-journal"

// RoomsKey is the SET of room ids the issuer keeps (internal/roomkey.Rooms,
// the one definition of the name).
const RoomsKey = roomkey.Rooms

// StreamKey is room's journal stream, in the room's hash slot.
func StreamKey(room string) string { return roomkey.Key(room, roomkey.Journal) }

// Consumer defaults.
const (
	MaxBatch         = 1000             // the most entries one XREADGROUP of one room returns
	MaxApply         = 1000             // the most events one transaction writes (but a stream entry's are never split)
	DefaultClaimIdle = 30 * time.Second // entries pending this long on another consumer are claimed
	// A room whose batch failed to apply is retried after MinBackoff,
	// doubling up to MaxBackoff while it keeps failing.
	MinBackoff = 100 * time.Millisecond
	MaxBackoff = 5 * time.Second
)

// streams lists the Redis commands the consumer uses, so *redis.Client,
// *redis.ClusterClient and the failover client all satisfy it. Every
// command names one key: no multi-key XREADGROUP, so Redis Cluster works.
type streams interface {
	Ping(ctx context.Context) *redis.StatusCmd
	SMembers(ctx context.Context, key string) *redis.StringSliceCmd
	XGroupCreate(ctx context.Context, stream, group, start string) *redis.StatusCmd
	XReadGroup(ctx context.Context, a *redis.XReadGroupArgs) *redis.XStreamSliceCmd
	XAutoClaim(ctx context.Context, a *redis.XAutoClaimArgs) *redis.XAutoClaimCmd
	XAck(ctx context.Context, stream, group string, ids ...string) *redis.IntCmd
	XTrimMinID(ctx context.Context, key string, minID string) *redis.IntCmd
	XInfoGroups(ctx context.Context, key string) *redis.XInfoGroupsCmd
	XPending(ctx context.Context, stream, group string) *redis.XPendingCmd
	XRangeN(ctx context.Context, stream, start, stop string, count int64) *redis.XMessageSliceCmd
}

// Config configures a Consumer. Redis and Store are required.
type Config struct {
	Redis streams // *redis.Client, *redis.ClusterClient, … (go-redis v9)
	Store *journal.Store
	// Name is this consumer's name in the group; "" means DefaultConsumerName().
	Name string
	// Batch is the most entries read from one room per XREADGROUP (1 …
	// MaxBatch; 0: MaxBatch).
	Batch int
	// ClaimIdle: entries pending on a consumer for longer are claimed with
	// XAUTOCLAIM (its consumer died). 0: DefaultClaimIdle.
	ClaimIdle time.Duration
	// Idle is the pause after a round in which no room had anything (0: 100 ms).
	Idle time.Duration
	// Metrics receives the counters and gauges; nil: NewMetrics(nil).
	Metrics *Metrics
	// Logger; nil: slog.Default().
	Logger *slog.Logger
	// Now is the clock of lag_seconds, of the claim period and of the
	// backoff after a failed Apply; nil: time.Now.
	Now func() time.Time
}

// DefaultConsumerName is "<hostname>-<pid>": unique per process, so a
// restarted process does not inherit its predecessor's pending entries by
// name (they are claimed after ClaimIdle instead).
func DefaultConsumerName() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "journal"
	}
	return h + "-" + strconv.Itoa(os.Getpid())
}

// Consumer copies the rooms' journal streams into the Store (docs/operations.md
// "Durability", the journal process). Run does the work; Lag and Ready
// answer for readiness. Delivery is at least once: entries are acked only
// after journal.Store.ApplyWaits returned nil (or after they were rejected as
// invalid), so a crash between the two replays them, which the Store's
// idempotent upserts absorb.
type Consumer struct {
	cfg Config
	m   *Metrics
	log *slog.Logger

	mu     sync.Mutex
	rooms  []string
	lag    map[string]time.Duration // room → lag_seconds at the last poll
	state  map[string]*roomState    // used by Run's goroutine only
	failed map[string]*failLog      // stage → its last failure logged
}

type roomState struct {
	group     bool      // the group exists (created or found)
	own       bool      // re-read our own pending entries (ID 0) before new ones
	claimedAt time.Time // last XAUTOCLAIM
	cursor    string    // XAUTOCLAIM's next start
	backoff   time.Duration
	retryAt   time.Time // after a failed Apply: skip the room until then
}

// New checks cfg and fills its defaults. Errors: a missing Redis or
// Store, a batch out of 1 … MaxBatch.
func New(cfg Config) (*Consumer, error) {
	if cfg.Redis == nil || cfg.Store == nil {
		return nil, errors.New("journal: consumer needs Redis and a Store")
	}
	if cfg.Batch == 0 {
		cfg.Batch = MaxBatch
	}
	if cfg.Batch < 1 || cfg.Batch > MaxBatch {
		return nil, fmt.Errorf("journal: batch must be 1 … %d, got %d", MaxBatch, cfg.Batch)
	}
	if cfg.Name == "" {
		cfg.Name = DefaultConsumerName()
	}
	if cfg.ClaimIdle <= 0 {
		cfg.ClaimIdle = DefaultClaimIdle
	}
	if cfg.Idle <= 0 {
		cfg.Idle = 100 * time.Millisecond
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Consumer{cfg: cfg, m: cfg.Metrics, log: cfg.Logger.With("consumer", cfg.Name),
		lag: map[string]time.Duration{}, state: map[string]*roomState{}}, nil
}

// Run consumes until ctx is cancelled, then returns nil after the batch in
// flight is written and acked (a batch whose Apply failed is left pending:
// this consumer, restarted under the same name, re-reads it; another claims
// it after ClaimIdle). The room list (SMEMBERS fg:rooms) and the lag gauges
// are refreshed every second by a goroutine of its own, so lag keeps being
// measured while PostgreSQL is down. Redis and
// PostgreSQL errors are logged, counted (flashgate_journal_errors_total)
// and retried; Run never returns them.
func (c *Consumer) Run(ctx context.Context) error {
	c.refresh(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				c.refresh(ctx)
			}
		}
	}()
	defer wg.Wait()
	for ctx.Err() == nil {
		busy := c.Round(ctx)
		if !busy {
			ctxtime.Sleep(ctx, c.cfg.Idle)
		}
	}
	return nil
}

// Round reads and writes at most one batch of each known room, round
// robin, and reports whether any room had entries. Run calls it in a loop;
// tests call it to step the consumer. Not safe for concurrent use with
// itself.
func (c *Consumer) Round(ctx context.Context) bool {
	c.mu.Lock()
	rooms := c.rooms
	c.mu.Unlock()
	if len(c.state) > len(rooms) { // rooms left fg:rooms: forget their state
		keep := make(map[string]bool, len(rooms))
		for _, r := range rooms {
			keep[r] = true
		}
		for r := range c.state {
			if !keep[r] {
				delete(c.state, r)
			}
		}
	}
	busy := false
	for _, room := range rooms {
		if ctx.Err() != nil {
			break
		}
		if c.poll(ctx, room) > 0 {
			busy = true
		}
	}
	return busy
}

// Refresh re-reads the room list and the lag of every room now (Run does
// it every second).
func (c *Consumer) Refresh(ctx context.Context) { c.refresh(ctx) }

func (c *Consumer) refresh(ctx context.Context) {
	rooms, err := c.cfg.Redis.SMembers(ctx, RoomsKey).Result()
	if err != nil {
		if ctx.Err() == nil {
			c.fail("rooms", "", err)
		}
		return
	}
	lags := make(map[string]time.Duration, len(rooms))
	for _, room := range rooms {
		lags[room] = c.measure(ctx, room)
	}
	c.mu.Lock()
	for room := range c.lag {
		if _, ok := lags[room]; !ok {
			c.m.forget(room)
		}
	}
	c.rooms, c.lag = rooms, lags
	c.mu.Unlock()
}

// measure sets room's lag gauges and returns its lag_seconds: events =
// the group's lag (entries not yet delivered) + pending (delivered, not
// acked); seconds = the age, by the stream id's milliseconds, of the
// oldest pending entry, else of the first undelivered one, else 0.
func (c *Consumer) measure(ctx context.Context, room string) time.Duration {
	key := StreamKey(room)
	groups, err := c.cfg.Redis.XInfoGroups(ctx, key).Result()
	if err != nil && strings.Contains(err.Error(), "no such key") {
		c.m.setLag(room, 0, 0) // no stream yet: nothing to lag behind
		return 0
	}
	if err != nil {
		// Redis unreachable: keep the last measurement (readiness fails on
		// Redis itself) rather than report "caught up".
		if ctx.Err() == nil {
			c.fail("lag", room, err)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.lag[room]
	}
	var g *redis.XInfoGroup
	for i := range groups {
		if groups[i].Name == Group {
			g = &groups[i]
		}
	}
	if g == nil { // the group is not created yet: everything in the stream is behind
		g = &redis.XInfoGroup{LastDeliveredID: "0-0", Lag: -1}
	}
	var oldest string
	if g.Pending > 0 {
		p, err := c.cfg.Redis.XPending(ctx, key, Group).Result()
		if err == nil {
			oldest = p.Lower
		}
	}
	undelivered := g.Lag
	if oldest == "" || undelivered < 0 {
		next, err := c.cfg.Redis.XRangeN(ctx, key, "("+g.LastDeliveredID, "+", MaxBatch).Result()
		if err == nil {
			if undelivered < 0 { // Redis cannot tell (e.g. after XDEL): count up to MaxBatch
				undelivered = int64(len(next))
			}
			if oldest == "" && len(next) > 0 {
				oldest = next[0].ID
			}
		}
	}
	var age time.Duration
	if ms, ok := idMillis(oldest); ok {
		age = max(0, c.cfg.Now().Sub(time.UnixMilli(ms)))
	}
	c.m.setLag(room, float64(undelivered+g.Pending), age.Seconds())
	return age
}

// Lag returns the largest lag_seconds of any room at the last refresh, and
// that room ("" when no room lags).
func (c *Consumer) Lag() (time.Duration, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var worst time.Duration
	var room string
	for r, l := range c.lag {
		if l > worst || (l == worst && room != "" && r < room) {
			worst, room = l, r
		}
	}
	return worst, room
}

// Ready returns nil when Redis and PostgreSQL answer and no room lags by
// more than maxLag, else why not (a sentence for /readyz).
func (c *Consumer) Ready(ctx context.Context, maxLag time.Duration) error {
	if err := c.cfg.Redis.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis unreachable: %v", err)
	}
	if err := c.cfg.Store.Ping(ctx); err != nil {
		return fmt.Errorf("postgresql unreachable: %v", err)
	}
	if lag, room := c.Lag(); lag > maxLag {
		return fmt.Errorf("room %q lags %s behind its journal stream (max %s)", room, lag.Round(time.Millisecond), maxLag)
	}
	return nil
}

// poll reads one batch of room (its own pending entries first, then those
// pending too long on dead consumers, then new ones), writes it and acks
// it. It returns how many entries it handled.
func (c *Consumer) poll(ctx context.Context, room string) int {
	st := c.state[room]
	if st == nil {
		st = &roomState{own: true, cursor: "0-0"}
		c.state[room] = st
	}
	if c.cfg.Now().Before(st.retryAt) {
		return 0
	}
	key := StreamKey(room)
	if !st.group {
		err := c.cfg.Redis.XGroupCreate(ctx, key, Group, "0").Err()
		switch {
		case err == nil, err != nil && strings.HasPrefix(err.Error(), "BUSYGROUP"):
			st.group, st.own, st.cursor = true, true, "0-0"
		case err != nil && strings.Contains(err.Error(), "requires the key to exist"):
			return 0 // no stream yet; creating it (MKSTREAM) would leave a key without the room's TTL
		default:
			if ctx.Err() == nil {
				c.fail("group", room, err)
			}
			return 0
		}
	}
	var msgs []redis.XMessage
	var err error
	switch {
	case st.own:
		msgs, err = c.read(ctx, key, "0")
		if err == nil && len(msgs) == 0 {
			st.own = false
			return c.poll(ctx, room)
		}
	case c.cfg.Now().Sub(st.claimedAt) >= c.cfg.ClaimIdle/2:
		st.claimedAt = c.cfg.Now()
		var next string
		msgs, next, err = c.cfg.Redis.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: key, Group: Group,
			Consumer: c.cfg.Name, MinIdle: c.cfg.ClaimIdle, Start: st.cursor, Count: int64(c.cfg.Batch)}).Result()
		if err == nil {
			st.cursor = next
			if next != "0-0" {
				st.claimedAt = time.Time{} // more to claim: go on next round
			}
			if len(msgs) == 0 {
				msgs, err = c.read(ctx, key, ">")
			}
		}
	default:
		msgs, err = c.read(ctx, key, ">")
	}
	if err != nil {
		if errors.Is(err, redis.Nil) {
			return 0
		}
		if strings.HasPrefix(err.Error(), "NOGROUP") {
			// Redis lost the stream (a restart without persistence) and a
			// new one was written: its group must be created again, from 0.
			c.log.Warn("journal group missing: creating it again", "room", room)
			st.group = false
			return 0
		}
		if ctx.Err() == nil {
			c.fail("read", room, err)
		}
		return 0
	}
	if len(msgs) == 0 {
		return 0
	}
	if !c.handle(ctx, room, st, msgs) {
		st.own = true // not acked: read them again (ID 0) before new ones
		return 0
	}
	return len(msgs)
}

// read is XREADGROUP of one stream from id ("0": this consumer's pending
// entries; ">": new ones), without blocking.
func (c *Consumer) read(ctx context.Context, key, id string) ([]redis.XMessage, error) {
	res, err := c.cfg.Redis.XReadGroup(ctx, &redis.XReadGroupArgs{Group: Group, Consumer: c.cfg.Name,
		Streams: []string{key, id}, Count: int64(c.cfg.Batch), Block: -1}).Result()
	if err != nil || len(res) == 0 {
		return nil, err
	}
	return res[0].Messages, nil
}

// handle parses msgs, applies the valid ones, then acks them all and trims
// the stream. It reports whether they were acked. A failed Apply (PostgreSQL
// down, or refusing the batch) acks nothing: the room backs off (st.retryAt)
// and its pending entries are read again, while the other rooms go on. The
// batch in flight is finished even if ctx is cancelled meanwhile.
// The events are applied in transactions of at most MaxApply events, each
// stream entry's events in one (a read of MaxBatch batch entries can hold
// 256 times as many events as entries: one transaction of them all could
// outlast its timeout on every retry); the metrics are observed once all are
// written, so a retried read counts them once.
func (c *Consumer) handle(ctx context.Context, room string, st *roomState, msgs []redis.XMessage) bool {
	key := StreamKey(room)
	ids := make([]string, 0, len(msgs))
	var chunks [][]journal.Event // each ≤ MaxApply events, or one stream entry's
	var admitted bool
	for _, m := range msgs {
		ids = append(ids, m.ID)
		if len(m.Values) == 0 {
			continue // deleted from the stream while pending: nothing to write
		}
		evs, bad := journal.StreamEvents(room, m.ID, func(k string) string {
			v, _ := m.Values[k].(string)
			return v
		})
		valid := evs[:0]
		for _, e := range evs {
			if err := e.Validate(); err != nil {
				bad = append(bad, err.Error())
				continue
			}
			valid = append(valid, e)
			admitted = admitted || e.Kind == journal.KindAdmitted
		}
		for _, why := range bad {
			c.log.Error("journal event rejected", "room", room, "id", m.ID, "why", why)
			c.m.rejected.WithLabelValues(room).Inc()
		}
		if n := len(chunks); n == 0 || len(chunks[n-1])+len(valid) > MaxApply {
			chunks = append(chunks, nil)
		}
		chunks[len(chunks)-1] = append(chunks[len(chunks)-1], valid...)
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	inOrder := true // only admissions are checked against the limits
	if admitted {
		inOrder = c.first(actx, key, ids[0])
	}
	var applied journal.Applied
	for _, events := range chunks {
		start := time.Now()
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		a, err := c.cfg.Store.ApplyChecked(pctx, events)
		cancel()
		if err != nil {
			c.fail("apply", room, err)
			st.backoff = min(max(2*st.backoff, MinBackoff), MaxBackoff)
			st.retryAt = c.cfg.Now().Add(st.backoff)
			return false
		}
		c.m.apply.Observe(time.Since(start).Seconds())
		applied.Waits = append(applied.Waits, a.Waits...)
		applied.Inversions = append(applied.Inversions, a.Inversions...)
		applied.RateOvershoots = append(applied.RateOvershoots, a.RateOvershoots...)
		applied.CapacityOvershoots = append(applied.CapacityOvershoots, a.CapacityOvershoots...)
	}
	st.backoff = 0
	for _, events := range chunks {
		for _, e := range events {
			c.m.events.WithLabelValues(room, string(e.Kind)).Inc()
		}
	}
	if !inOrder && len(applied.RateOvershoots)+len(applied.CapacityOvershoots) > 0 {
		// An end or a config change before the batch may not be written yet:
		// what looks like an overshoot may not be one (Store.ApplyChecked).
		c.m.skipped.WithLabelValues(room).Inc()
		applied.RateOvershoots, applied.CapacityOvershoots = nil, nil
	}
	c.m.observe(applied)
	if err := c.cfg.Redis.XAck(actx, key, Group, ids...).Err(); err != nil {
		c.fail("ack", room, err)
		return false
	}
	c.trim(actx, room)
	return true
}

// first reports whether no entry of the stream older than id (the first of
// the batch this consumer holds) is still pending on any consumer: then
// every earlier entry has been written and acked (entries are delivered in
// stream order), and the batch's overshoot checks see all of them. False
// when XPENDING fails.
func (c *Consumer) first(ctx context.Context, key, id string) bool {
	p, err := c.cfg.Redis.XPending(ctx, key, Group).Result()
	if err != nil {
		return false
	}
	return p.Count == 0 || !idLess(p.Lower, id)
}

// idLess orders stream ids "<ms>-<n>".
func idLess(a, b string) bool {
	am, an, _ := strings.Cut(a, "-")
	bm, bn, _ := strings.Cut(b, "-")
	x, _ := strconv.ParseUint(am, 10, 64)
	y, _ := strconv.ParseUint(bm, 10, 64)
	if x != y {
		return x < y
	}
	x, _ = strconv.ParseUint(an, 10, 64)
	y, _ = strconv.ParseUint(bn, 10, 64)
	return x < y
}

// trim drops the entries every consumer is done with: XTRIM MINID the
// oldest entry still pending, or, with none pending, the group's
// last-delivered id (kept itself: MINID keeps ids ≥ it).
func (c *Consumer) trim(ctx context.Context, room string) {
	key := StreamKey(room)
	minID := ""
	p, err := c.cfg.Redis.XPending(ctx, key, Group).Result()
	if err != nil {
		c.fail("trim", room, err)
		return
	}
	if p.Count > 0 {
		minID = p.Lower
	} else {
		groups, err := c.cfg.Redis.XInfoGroups(ctx, key).Result()
		if err != nil {
			c.fail("trim", room, err)
			return
		}
		for _, g := range groups {
			if g.Name == Group {
				minID = g.LastDeliveredID
			}
		}
	}
	if minID == "" {
		return
	}
	if err := c.cfg.Redis.XTrimMinID(ctx, key, minID).Err(); err != nil {
		c.fail("trim", room, err)
	}
}

// failLogEvery is how often a failing stage is logged: an outage of Redis
// or PostgreSQL fails every round, and the log should say so once in a
// while, with how many failures it did not log, not ten times a second.
const failLogEvery = 10 * time.Second

// fail counts a failed step and logs it, at most once per failLogEvery per
// stage.
func (c *Consumer) fail(stage, room string, err error) {
	c.m.errors.WithLabelValues(stage).Inc()
	c.mu.Lock()
	if c.failed == nil {
		c.failed = map[string]*failLog{}
	}
	f := c.failed[stage]
	if f == nil {
		f = &failLog{}
		c.failed[stage] = f
	}
	now := time.Now()
	if !f.at.IsZero() && now.Sub(f.at) < failLogEvery {
		f.unlogged++
		c.mu.Unlock()
		return
	}
	unlogged := f.unlogged
	f.at, f.unlogged = now, 0
	c.mu.Unlock()
	c.log.Warn("journal "+stage+" failed", "room", room, "err", err, "unlogged_before", unlogged)
}

type failLog struct {
	at       time.Time
	unlogged int
}

// idMillis is the milliseconds part of a stream id "<ms>-<n>".
func idMillis(id string) (int64, bool) {
	ms, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	return n, err == nil && id != ""
}
