package consumer_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/pgtest"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/journal"
	"github.com/flashgate/flashgate/journal/consumer"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const epoch = "ab12cd34ef"

// store migrates a fresh database and opens a Store on it.
func store(t testing.TB) (*journal.Store, string) {
	t.Helper()
	dsn := pgtest.Shared(t).NewDatabase(t)
	require.NoError(t, journal.Migrate(context.Background(), dsn))
	s, err := journal.Open(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s, dsn
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// xaddEntry appends an entry event in the layout written before batches
// (kind epoch seq user lane at admission reason) and returns its id.
func xaddEntry(t *testing.T, rdb redis.Cmdable, room, kind, ep string, seq int64, user, lane string, at int64, admission, reason string) string {
	t.Helper()
	id, err := rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: consumer.StreamKey(room), Values: []any{
		"kind", kind, "epoch", ep, "seq", strconv.FormatInt(seq, 10), "user", user, "lane", lane,
		"at", strconv.FormatInt(at, 10), "admission", admission, "reason", reason}}).Result()
	require.NoError(t, err)
	return id
}

// xaddRoom appends a room event (kind epoch at actor action detail).
func xaddRoom(t *testing.T, rdb redis.Cmdable, room, kind, ep string, at int64, actor, action, detail string) string {
	t.Helper()
	id, err := rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: consumer.StreamKey(room), Values: []any{
		"kind", kind, "epoch", ep, "at", strconv.FormatInt(at, 10), "actor", actor, "action", action, "detail", detail}}).Result()
	require.NoError(t, err)
	return id
}

// buyer journals one buyer's life in room: entered at 1000·seq, admitted
// 5 s later, completed 1 s after that.
func buyer(t *testing.T, rdb redis.Cmdable, room string, seq int64) {
	t.Helper()
	at := 1000 * seq
	adm := fmt.Sprintf("%s.%d.%d.%d", epoch, seq, seq, at+5000)
	xaddEntry(t, rdb, room, "entered", epoch, seq, fmt.Sprintf("u%d", seq), "public", at, "", "")
	xaddEntry(t, rdb, room, "admitted", epoch, seq, "", "public", at+5000, adm, "")
	xaddEntry(t, rdb, room, "completed", epoch, seq, "", "", at+6000, adm, "")
}

type rig struct {
	rdb *redis.Client
	st  *journal.Store
	dsn string
}

func newRig(t *testing.T) rig {
	t.Helper()
	st, dsn := store(t)
	return rig{rdb: redistest.Start(t).Client(t), st: st, dsn: dsn}
}

func (r rig) consumer(t *testing.T, name string, mod func(*consumer.Config)) (*consumer.Consumer, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg := consumer.Config{Redis: r.rdb, Store: r.st, Name: name, Metrics: consumer.NewMetrics(reg), Logger: quiet}
	if mod != nil {
		mod(&cfg)
	}
	c, err := consumer.New(cfg)
	require.NoError(t, err)
	c.Refresh(context.Background())
	return c, reg
}

// drain steps c until a round finds nothing (at most 100 rounds).
func drain(t *testing.T, c *consumer.Consumer) {
	t.Helper()
	for i := 0; i < 100; i++ {
		if !c.Round(context.Background()) {
			return
		}
	}
	t.Fatal("the consumer is still busy after 100 rounds")
}

// metric sums the samples of name whose labels include want: a counter's
// or gauge's value, a histogram's sample count.
func metric(t *testing.T, reg prometheus.Gatherer, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for k, v := range want {
				if !hasLabel(m, k, v) {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			case m.Histogram != nil:
				sum += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return sum
}

func hasLabel(m *dto.Metric, k, v string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == k && l.GetValue() == v {
			return true
		}
	}
	return false
}

func count(t *testing.T, dsn, query string, args ...any) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var n int
	require.NoError(t, conn.QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}

func pending(t *testing.T, rdb redis.Cmdable, room string) int64 {
	t.Helper()
	p, err := rdb.XPending(context.Background(), consumer.StreamKey(room), consumer.Group).Result()
	require.NoError(t, err)
	return p.Count
}

// TestConsumerWritesTheStream: entry and room events XADDed in the
// contract's layout land in journal_entries and journal_room_events; the
// stream is acked and trimmed; the wait histogram observes each admitted
// entry once; a room without a stream yet is skipped, not created.
func TestConsumerWritesTheStream(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	room, empty := redistest.Room("w"), redistest.Room("e")
	require.NoError(t, r.rdb.SAdd(ctx, consumer.RoomsKey, room, empty).Err())
	cfgID := xaddRoom(t, r.rdb, room, "config", epoch, 500, "", "create", `{"capacity":"100"}`)
	for seq := int64(1); seq <= 20; seq++ {
		buyer(t, r.rdb, room, seq)
	}
	xaddEntry(t, r.rdb, room, "entered", epoch, 21, "u21", "priority", 30000, "", "")
	xaddEntry(t, r.rdb, room, "closed", epoch, 21, "", "", 31000, "", "sold_out")
	xaddRoom(t, r.rdb, room, "audit", epoch, 31000, "admin:3f9c", "sold_out", "")

	c, reg := r.consumer(t, "c1", nil)
	drain(t, c)

	require.Equal(t, 21, count(t, r.dsn, `SELECT count(*) FROM journal_entries WHERE room = $1`, room))
	require.Equal(t, 20, count(t, r.dsn, `SELECT count(*) FROM journal_entries WHERE room = $1
		AND admitted_ms - entered_ms = 5000 AND end_kind = 'completed' AND user_id IS NOT NULL`, room))
	require.Equal(t, 1, count(t, r.dsn, `SELECT count(*) FROM journal_entries WHERE room = $1 AND arrival = 21
		AND end_kind = 'closed' AND end_reason = 'sold_out' AND lane = 'priority' AND admitted_ms IS NULL`, room))
	require.Equal(t, 2, count(t, r.dsn, `SELECT count(*) FROM journal_room_events WHERE room = $1`, room))
	require.Equal(t, 1, count(t, r.dsn, `SELECT count(*) FROM journal_room_events WHERE room = $1 AND stream_id = $2
		AND kind = 'config' AND action = 'create' AND detail->>'capacity' = '100'`, room, cfgID))

	require.Zero(t, pending(t, r.rdb, room))
	n, err := r.rdb.XLen(ctx, consumer.StreamKey(room)).Result()
	require.NoError(t, err)
	require.LessOrEqual(t, n, int64(1), "XTRIM MINID keeps at most the last delivered entry")
	require.Zero(t, r.rdb.Exists(ctx, consumer.StreamKey(empty)).Val(), "the consumer must not create a stream")

	require.Equal(t, 20.0, metric(t, reg, "flashgate_wait_seconds", map[string]string{"room": room}))
	require.Equal(t, 20.0, metric(t, reg, "flashgate_journal_events_total", map[string]string{"room": room, "kind": "admitted"}))
	require.Equal(t, 64.0, metric(t, reg, "flashgate_journal_events_total", map[string]string{"room": room}))
	require.Equal(t, 0.0, metric(t, reg, "flashgate_journal_rejected_total", nil))
	c.Refresh(ctx)
	require.Equal(t, 0.0, metric(t, reg, "flashgate_journal_lag_events", map[string]string{"room": room}))
	lag, _ := c.Lag()
	require.Zero(t, lag)
}

// TestReadyFollowsLag: a room whose oldest unwritten entry is older than
// the max lag makes the consumer not ready, naming the room; writing it
// makes it ready again. A stream no group has read yet counts from its
// first entry.
func TestReadyFollowsLag(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	room := redistest.Room("l")
	require.NoError(t, r.rdb.SAdd(ctx, consumer.RoomsKey, room).Err())
	id := xaddEntry(t, r.rdb, room, "entered", epoch, 1, "u1", "public", 1000, "", "")
	ms, err := strconv.ParseInt(strings.SplitN(id, "-", 2)[0], 10, 64)
	require.NoError(t, err)
	at := time.UnixMilli(ms).Add(time.Minute) // the entry is a minute old
	c, reg := r.consumer(t, "c", func(c *consumer.Config) { c.Now = func() time.Time { return at } })
	require.Equal(t, 60.0, metric(t, reg, "flashgate_journal_lag_seconds", map[string]string{"room": room}))
	require.Equal(t, 1.0, metric(t, reg, "flashgate_journal_lag_events", map[string]string{"room": room}))
	lag, worst := c.Lag()
	require.Equal(t, time.Minute, lag)
	require.Equal(t, room, worst)
	require.ErrorContains(t, c.Ready(ctx, 30*time.Second), fmt.Sprintf("room %q lags 1m0s", room))
	require.NoError(t, c.Ready(ctx, 2*time.Minute))
	drain(t, c)
	c.Refresh(ctx)
	require.NoError(t, c.Ready(ctx, 30*time.Second))
}

// TestConsumerClaimsADeadConsumersEntries: entries delivered to a consumer
// that died before acking are claimed (XAUTOCLAIM, idle > 30 s) by another
// and written once.
func TestConsumerClaimsADeadConsumersEntries(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	room := redistest.Room("d")
	key := consumer.StreamKey(room)
	require.NoError(t, r.rdb.SAdd(ctx, consumer.RoomsKey, room).Err())
	for seq := int64(1); seq <= 10; seq++ {
		buyer(t, r.rdb, room, seq)
	}
	// "dead" reads them all, applies half of them (it died mid-way), never acks.
	require.NoError(t, r.rdb.XGroupCreate(ctx, key, consumer.Group, "0").Err())
	res, err := r.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: consumer.Group, Consumer: "dead",
		Streams: []string{key, ">"}, Count: 1000, Block: -1}).Result()
	require.NoError(t, err)
	require.Len(t, res[0].Messages, 30)
	ids := make([]any, 0, 30)
	for _, m := range res[0].Messages {
		ids = append(ids, m.ID)
	}
	// Make them look idle for a minute (XCLAIM … IDLE keeps the owner).
	require.NoError(t, r.rdb.Do(ctx, append(append([]any{"XCLAIM", key, consumer.Group, "dead", 0}, ids...),
		"IDLE", 60000, "JUSTID")...).Err())
	half := []journal.Event{{ID: res[0].Messages[0].ID, Kind: journal.KindEntered, Room: room, Epoch: epoch,
		Arrival: 1, User: "u1", Lane: "public", At: 1000}}
	require.NoError(t, r.st.Apply(ctx, half))

	c, reg := r.consumer(t, "alive", nil)
	drain(t, c)
	require.Zero(t, pending(t, r.rdb, room))
	require.Equal(t, 10, count(t, r.dsn, `SELECT count(*) FROM journal_entries WHERE room = $1
		AND entered_ms IS NOT NULL AND admitted_ms IS NOT NULL AND end_kind = 'completed'`, room))
	require.Equal(t, 30.0, metric(t, reg, "flashgate_journal_events_total", map[string]string{"room": room}),
		"each claimed entry is applied once by the claimer")
}

// TestTwoConsumersShareTheWork: two consumers of the group split the
// entries of several rooms between them, each entry to one of them.
func TestTwoConsumersShareTheWork(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	var rooms []string
	for i := 0; i < 3; i++ {
		room := redistest.Room("s")
		rooms = append(rooms, room)
		require.NoError(t, r.rdb.SAdd(ctx, consumer.RoomsKey, room).Err())
		for seq := int64(1); seq <= 30; seq++ {
			buyer(t, r.rdb, room, seq)
		}
	}
	small := func(c *consumer.Config) { c.Batch = 20 }
	a, ra := r.consumer(t, "a", small)
	b, rb := r.consumer(t, "b", small)
	for i := 0; i < 100; i++ {
		busyA := a.Round(ctx)
		busyB := b.Round(ctx)
		if !busyA && !busyB {
			break
		}
	}
	ea := metric(t, ra, "flashgate_journal_events_total", nil)
	eb := metric(t, rb, "flashgate_journal_events_total", nil)
	require.Positive(t, ea)
	require.Positive(t, eb)
	require.Equal(t, 3*90.0, ea+eb, "every entry is delivered to exactly one consumer")
	for _, room := range rooms {
		require.Zero(t, pending(t, r.rdb, room))
		require.Equal(t, 30, count(t, r.dsn, `SELECT count(*) FROM journal_entries WHERE room = $1
			AND end_kind = 'completed' AND admitted_ms IS NOT NULL`, room))
	}
}

// TestPoisonEventIsRejected: an entry that is not a valid event is logged,
// counted and acked, and its neighbours land.
func TestPoisonEventIsRejected(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	room := redistest.Room("p")
	require.NoError(t, r.rdb.SAdd(ctx, consumer.RoomsKey, room).Err())
	xaddEntry(t, r.rdb, room, "entered", epoch, 1, "u1", "public", 1000, "", "")
	bad1 := xaddEntry(t, r.rdb, room, "teleported", epoch, 2, "u2", "public", 1000, "", "")
	xaddEntry(t, r.rdb, room, "entered", epoch, 3, "u3", "public", 1000, "", "")
	bad2, err := r.rdb.XAdd(ctx, &redis.XAddArgs{Stream: consumer.StreamKey(room),
		Values: []any{"kind", "entered", "epoch", epoch, "seq", "three", "user", "u3", "lane", "public", "at", "1000",
			"admission", "", "reason", ""}}).Result() // seq not a number
	require.NoError(t, err)
	bad3 := xaddEntry(t, r.rdb, room, "entered", epoch, 5, "u\x005", "public", 1000, "", "") // PostgreSQL text refuses NUL
	xaddEntry(t, r.rdb, room, "entered", epoch, 4, "u4", "public", 1000, "", "")

	var logs syncBuffer
	c, reg := r.consumer(t, "c", func(c *consumer.Config) { c.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	drain(t, c)
	require.Equal(t, 3, count(t, r.dsn, `SELECT count(*) FROM journal_entries WHERE room = $1`, room))
	require.Equal(t, 3.0, metric(t, reg, "flashgate_journal_rejected_total", map[string]string{"room": room}))
	require.Zero(t, pending(t, r.rdb, room))
	for _, id := range []string{bad1, bad2, bad3} {
		require.Contains(t, logs.String(), `"msg":"journal event rejected","consumer":"c","room":"`+room+`","id":"`+id+`","why":`)
	}
	require.Contains(t, logs.String(), `unknown kind \"teleported\"`)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// proxy forwards TCP to a PostgreSQL server until cut: then it refuses new
// connections and drops the open ones, as a PostgreSQL down does.
type proxy struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{addr: ln.Addr().String(), target: target}
	p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", p.target)
			if err != nil {
				_ = in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
			go func() { _, _ = io.Copy(in, out); _ = in.Close() }()
		}
	}()
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func (p *proxy) restore(t *testing.T) {
	ln, err := net.Listen("tcp", p.addr)
	require.NoError(t, err)
	p.serve(ln)
}

// TestPostgresDownMidRun: while PostgreSQL is unreachable nothing is acked,
// the room backs off, lag is measured and readiness fails; when PostgreSQL is back the consumer
// catches up alone and acks.
func TestPostgresDownMidRun(t *testing.T) {
	srv := pgtest.Shared(t)
	dsn := srv.NewDatabase(t)
	ctx := context.Background()
	require.NoError(t, journal.Migrate(ctx, dsn))
	px := newProxy(t, "127.0.0.1:"+strconv.Itoa(srv.Port))
	st, err := journal.Open(ctx, strings.Replace(dsn, "127.0.0.1:"+strconv.Itoa(srv.Port), px.addr, 1))
	require.NoError(t, err)
	t.Cleanup(st.Close)
	r := rig{rdb: redistest.Start(t).Client(t), st: st, dsn: dsn}
	room := redistest.Room("pg")
	require.NoError(t, r.rdb.SAdd(ctx, consumer.RoomsKey, room).Err())
	buyer(t, r.rdb, room, 1)
	// The test's clock: an hour ahead of the stream ids (lag ≈ 1 h), moved
	// on by hand past the backoff.
	var mu sync.Mutex
	now := time.Now().Add(time.Hour)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	c, reg := r.consumer(t, "c", func(c *consumer.Config) { c.Now = clock })
	drain(t, c)
	require.Equal(t, 1, count(t, dsn, `SELECT count(*) FROM journal_entries WHERE room = $1`, room))

	px.cut()
	for seq := int64(2); seq <= 5; seq++ {
		buyer(t, r.rdb, room, seq)
	}
	require.False(t, c.Round(ctx), "a failed batch is not progress")
	require.EqualValues(t, 12, pending(t, r.rdb, room), "the batch is delivered and not acked")
	require.Equal(t, 1.0, metric(t, reg, "flashgate_journal_errors_total", map[string]string{"stage": "apply"}))
	require.False(t, c.Round(ctx))
	require.Equal(t, 1.0, metric(t, reg, "flashgate_journal_errors_total", map[string]string{"stage": "apply"}),
		"the room backs off: no second attempt before its backoff passed")
	advance(time.Second)
	require.False(t, c.Round(ctx))
	require.Equal(t, 2.0, metric(t, reg, "flashgate_journal_errors_total", map[string]string{"stage": "apply"}),
		"the pending batch is read again (ID 0) and retried")
	c.Refresh(ctx)
	require.Equal(t, 12.0, metric(t, reg, "flashgate_journal_lag_events", map[string]string{"room": room}))
	require.Greater(t, metric(t, reg, "flashgate_journal_lag_seconds", map[string]string{"room": room}), 3000.0)
	require.ErrorContains(t, c.Ready(ctx, 30*time.Second), "postgresql unreachable")
	require.Equal(t, 1, count(t, dsn, `SELECT count(*) FROM journal_entries WHERE room = $1`, room))

	px.restore(t)
	for i := 0; i < 20 && pending(t, r.rdb, room) > 0; i++ {
		advance(consumer.MaxBackoff) // a pooled connection cut with the proxy may fail once more
		c.Round(ctx)
	}
	require.Zero(t, pending(t, r.rdb, room))
	require.Equal(t, 5, count(t, dsn, `SELECT count(*) FROM journal_entries WHERE room = $1 AND end_kind = 'completed'`, room))
	c.Refresh(ctx)
	require.Equal(t, 0.0, metric(t, reg, "flashgate_journal_lag_seconds", map[string]string{"room": room}))
	require.Equal(t, 0.0, metric(t, reg, "flashgate_journal_lag_events", map[string]string{"room": room}))
	require.NoError(t, c.Ready(ctx, 30*time.Second))
}

// TestConsumerRecoversFromFlushAll: Redis loses everything (FLUSHALL, as a
// restart without persistence does); the room's new stream has no group
// (NOGROUP), which the consumer creates again from 0 and reads.
func TestConsumerRecoversFromFlushAll(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	room := redistest.Room("f")
	require.NoError(t, r.rdb.SAdd(ctx, consumer.RoomsKey, room).Err())
	buyer(t, r.rdb, room, 1)
	c, _ := r.consumer(t, "c", nil)
	drain(t, c)

	require.NoError(t, r.rdb.FlushAll(ctx).Err())
	require.NoError(t, r.rdb.SAdd(ctx, consumer.RoomsKey, room).Err())
	const epoch2 = "zz12cd34ef"
	xaddEntry(t, r.rdb, room, "entered", epoch2, 1, "v1", "public", 9000, "", "")
	for i := 0; i < 5; i++ {
		c.Round(ctx)
	}
	require.Equal(t, 1, count(t, r.dsn, `SELECT count(*) FROM journal_entries WHERE room = $1 AND epoch = $2 AND user_id = 'v1'`, room, epoch2))
	require.Zero(t, pending(t, r.rdb, room))
}

// TestConsumerOnRedisCluster: on a three-master Redis Cluster, rooms whose
// streams hash to different nodes are all written (every command the
// consumer sends names one key).
func TestConsumerOnRedisCluster(t *testing.T) {
	st, dsn := store(t)
	rdb := redistest.StartCluster(t, 3).Client(t)
	ctx := context.Background()
	var rooms []string
	slots := map[int64]bool{}
	for i := 0; i < 100 && (len(rooms) < 6 || len(slots) < 3); i++ { // rooms on every node
		room := redistest.Room("cl")
		slot, err := rdb.ClusterKeySlot(ctx, consumer.StreamKey(room)).Result()
		require.NoError(t, err)
		if len(rooms) >= 3 && slots[slot/5462] {
			continue
		}
		rooms = append(rooms, room)
		slots[slot/5462] = true // the node holding it, with slots spread evenly
		require.NoError(t, rdb.SAdd(ctx, consumer.RoomsKey, room).Err())
		for seq := int64(1); seq <= 5; seq++ {
			buyer(t, rdb, room, seq)
		}
	}
	require.Len(t, slots, 3, "the rooms should span the three nodes")
	c, err := consumer.New(consumer.Config{Redis: rdb, Store: st, Name: "c", Logger: quiet})
	require.NoError(t, err)
	c.Refresh(ctx)
	drain(t, c)
	for _, room := range rooms {
		require.Zero(t, pending(t, rdb, room))
		require.Equal(t, 5, count(t, dsn, `SELECT count(*) FROM journal_entries WHERE room = $1 AND end_kind = 'completed'`, room))
	}
}

// BenchmarkConsumer measures how fast one consumer writes a room's stream
// to PostgreSQL: 3,000 events (1,000 buyers entered, admitted, completed),
// XADDed beforehand, drained in reads of up to 1,000 stream entries. Reports
// events/s.
func BenchmarkConsumer(b *testing.B) {
	// per-event: the layout written before batches, one stream entry per
	// event; batch: the scripts' batch entries, 32 events each (a batch of
	// enters, then of admissions, then of completions).
	for _, layout := range []string{"per-event", "batch"} {
		b.Run("layout="+layout, func(b *testing.B) { benchConsumer(b, layout == "batch") })
	}
}

func benchConsumer(b *testing.B, batched bool) {
	st, _ := store(b)
	rdb := redistest.Start(b).Client(b)
	ctx := context.Background()
	c, err := consumer.New(consumer.Config{Redis: rdb, Store: st, Name: "bench", Logger: quiet})
	require.NoError(b, err)
	const buyers = 1000
	var total time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		room := redistest.Room("bench")
		require.NoError(b, rdb.SAdd(ctx, consumer.RoomsKey, room).Err())
		pipe := rdb.Pipeline()
		var lines [3][]string
		flush := func() {
			for k := range lines {
				if len(lines[k]) > 0 {
					pipe.XAdd(ctx, &redis.XAddArgs{Stream: consumer.StreamKey(room),
						Values: []any{"kind", "batch", "epoch", epoch, "events", strings.Join(lines[k], "\n")}})
				}
				lines[k] = lines[k][:0]
			}
		}
		for seq := int64(1); seq <= buyers; seq++ {
			if batched {
				for k, ev := range buyerEvents(seq) {
					lines[k] = append(lines[k], ev)
				}
				if seq%32 == 0 {
					flush()
				}
				continue
			}
			for _, ev := range buyerEvents(seq) {
				xaddOld(pipe, room, ev)
			}
		}
		flush()
		_, err := pipe.Exec(ctx)
		require.NoError(b, err)
		c.Refresh(ctx)
		b.StartTimer()
		start := time.Now()
		for c.Round(ctx) {
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(3*buyers*b.N)/total.Seconds(), "events/s")
}
