package consumer_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/journal"
	"github.com/flashgate/flashgate/journal/consumer"
)

// xaddBatch appends a batch entry (kind batch, epoch, events: one event per
// line, kind,seq,user,lane,at,admission,reason,eta) and returns its id.
func xaddBatch(t *testing.T, rdb redis.Cmdable, room, ep string, events ...string) string {
	t.Helper()
	id, err := rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: consumer.StreamKey(room), Values: []any{
		"kind", "batch", "epoch", ep, "events", strings.Join(events, "\n")}}).Result()
	require.NoError(t, err)
	return id
}

// buyerEvents are buyer's three events as batch lines (entered with an
// estimate of 4 s, admitted 5 s later, completed 1 s after that).
func buyerEvents(seq int64) [3]string {
	at := 1000 * seq
	adm := fmt.Sprintf("%s.%d.%d.%d", epoch, seq, seq, at+5000)
	return [3]string{
		fmt.Sprintf("entered,%d,u%d,public,%d,,,4000", seq, seq, at),
		fmt.Sprintf("admitted,%d,,public,%d,%s,,", seq, at+5000, adm),
		fmt.Sprintf("completed,%d,,,%d,%s,,", seq, at+6000, adm),
	}
}

// xaddOld appends ev (a batch line) in the layout written before batches:
// a stream entry of its own with its fields by name.
func xaddOld(rdb redis.Cmdable, room, ev string) *redis.StringCmd {
	f := strings.Split(ev, ",")
	return rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: consumer.StreamKey(room), Values: []any{
		"kind", f[0], "epoch", epoch, "seq", f[1], "user", f[2], "lane", f[3], "at", f[4], "admission", f[5],
		"reason", f[6], "eta", f[7]}})
}

// oldBuyer journals buyerEvents(seq) in the layout written before batches.
func oldBuyer(t *testing.T, rdb redis.Cmdable, room string, seq int64) {
	t.Helper()
	for _, ev := range buyerEvents(seq) {
		require.NoError(t, xaddOld(rdb, room, ev).Err())
	}
}

// entryRows is every journal_entries row of room but its room and
// updated_at, in arrival order.
func entryRows(t *testing.T, dsn, room string) []string {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT epoch, arrival, user_id, lane, entered_ms, admitted_ms,
		admission_id, exchanged_ms, ended_ms, end_kind, end_reason, estimated_wait_ms, admission_no
		FROM journal_entries WHERE room = $1 ORDER BY epoch, arrival`, room)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		v, err := rows.Values()
		require.NoError(t, err)
		out = append(out, fmt.Sprint(v...))
	}
	require.NoError(t, rows.Err())
	return out
}

// TestConsumerReadsBothFormats: one stream holding entries of the layout
// written before batches (an upgrade leaves them behind) and batch entries
// (one per script call) is written exactly as a stream of the old layout
// alone: the same rows, the same events counted, the same waits and
// estimate errors observed, nothing rejected.
func TestConsumerReadsBothFormats(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	old, mixed := redistest.Room("old"), redistest.Room("mixed")
	require.NoError(t, r.rdb.SAdd(ctx, consumer.RoomsKey, old, mixed).Err())
	for _, room := range []string{old, mixed} {
		xaddRoom(t, r.rdb, room, "config", epoch, 500, "", "create", `{"capacity":"100"}`)
	}
	for seq := int64(1); seq <= 20; seq++ {
		oldBuyer(t, r.rdb, old, seq)
	}
	for seq := int64(1); seq <= 5; seq++ { // written before the upgrade
		oldBuyer(t, r.rdb, mixed, seq)
	}
	var entered, admitted, completed []string
	for seq := int64(6); seq <= 20; seq++ {
		ev := buyerEvents(seq)
		entered, admitted, completed = append(entered, ev[0]), append(admitted, ev[1]), append(completed, ev[2])
	}
	xaddBatch(t, r.rdb, mixed, epoch, entered...) // an enter call of 15 buyers
	xaddBatch(t, r.rdb, mixed, epoch, admitted[:8]...)
	xaddRoom(t, r.rdb, mixed, "audit", epoch, 9000, "admin:3f9c", "pause", "")
	xaddBatch(t, r.rdb, mixed, epoch, append(admitted[8:], completed...)...)
	xaddRoom(t, r.rdb, old, "audit", epoch, 9000, "admin:3f9c", "pause", "")

	c, reg := r.consumer(t, "c", nil)
	drain(t, c)

	want := entryRows(t, r.dsn, old)
	require.Len(t, want, 20)
	require.Equal(t, want, entryRows(t, r.dsn, mixed))
	for _, room := range []string{old, mixed} {
		require.Equal(t, 2, count(t, r.dsn, `SELECT count(*) FROM journal_room_events WHERE room = $1`, room))
		require.Zero(t, pending(t, r.rdb, room))
		for _, kind := range []string{"entered", "admitted", "completed"} {
			require.Equal(t, 20.0, metric(t, reg, "flashgate_journal_events_total", map[string]string{"room": room, "kind": kind}),
				"%s %s", room, kind)
		}
		require.Equal(t, 20.0, metric(t, reg, "flashgate_wait_seconds", map[string]string{"room": room}))
	}
	for _, name := range []string{"flashgate_wait_seconds", "flashgate_estimate_error_seconds",
		"flashgate_estimate_over_seconds_total", "flashgate_estimate_under_seconds_total", "flashgate_order_inversions_total"} {
		require.Equal(t, metric(t, reg, name, map[string]string{"room": old}), metric(t, reg, name, map[string]string{"room": mixed}), name)
	}
	require.Equal(t, 20.0, metric(t, reg, "flashgate_estimate_error_seconds", map[string]string{"room": mixed}))
	require.Equal(t, 0.0, metric(t, reg, "flashgate_journal_rejected_total", nil))
	n, err := r.rdb.XLen(ctx, consumer.StreamKey(mixed)).Result()
	require.NoError(t, err)
	require.LessOrEqual(t, n, int64(1), "trimmed like any other entries")
}

// TestRedeliveredBatchIsIdempotent: a consumer that wrote a batch entry and
// died before acking it leaves it pending; the consumer that claims it
// writes it again, which changes no row (entry events are keyed by room,
// epoch and arrival), and acks it.
func TestRedeliveredBatchIsIdempotent(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	room, once := redistest.Room("again"), redistest.Room("once")
	key := consumer.StreamKey(room)
	require.NoError(t, r.rdb.SAdd(ctx, consumer.RoomsKey, room, once).Err())
	var lines []string
	for seq := int64(1); seq <= 10; seq++ {
		ev := buyerEvents(seq)
		lines = append(lines, ev[:]...)
	}
	xaddBatch(t, r.rdb, room, epoch, lines...)
	xaddBatch(t, r.rdb, once, epoch, lines...)

	require.NoError(t, r.rdb.XGroupCreate(ctx, key, consumer.Group, "0").Err())
	res, err := r.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: consumer.Group, Consumer: "dead",
		Streams: []string{key, ">"}, Count: 1000, Block: -1}).Result()
	require.NoError(t, err)
	require.Len(t, res[0].Messages, 1)
	m := res[0].Messages[0]
	evs, bad := journal.StreamEvents(room, m.ID, func(k string) string { v, _ := m.Values[k].(string); return v })
	require.Empty(t, bad)
	require.Len(t, evs, 30)
	require.NoError(t, r.st.Apply(ctx, evs)) // written, never acked
	written := entryRows(t, r.dsn, room)
	require.Len(t, written, 10)
	require.NoError(t, r.rdb.Do(ctx, "XCLAIM", key, consumer.Group, "dead", 0, m.ID, "IDLE", 60000, "JUSTID").Err())

	c, reg := r.consumer(t, "alive", nil)
	drain(t, c)
	require.Zero(t, pending(t, r.rdb, room), "claimed, written again and acked")
	require.Equal(t, 30.0, metric(t, reg, "flashgate_journal_events_total", map[string]string{"room": room}))
	require.Equal(t, written, entryRows(t, r.dsn, room), "the second write changes nothing")
	require.Equal(t, entryRows(t, r.dsn, once), written, "as one delivery writes it")
}

// TestBadBatchEventIsRejected: an event of a batch entry that cannot be
// read (a field too many or too few, a seq that is not a number, a room
// event's kind, an invalid event) is rejected alone, logged with the
// entry's id and counted; the others of the entry are written.
func TestBadBatchEventIsRejected(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	room := redistest.Room("pb")
	require.NoError(t, r.rdb.SAdd(ctx, consumer.RoomsKey, room).Err())
	id := xaddBatch(t, r.rdb, room, epoch,
		"entered,1,u1,public,1000,,,",
		"entered,2,u,2,public,1000,,,", // a comma in the user: nine fields
		"entered,3,u3,public,1000,,",   // seven
		"entered,three,u3,public,1000,,,",
		"config,4,,,1000,,,",
		"entered,5,,public,1000,,,", // no user
		"entered,6,u6,public,1000,,,")
	emptyID := xaddBatch(t, r.rdb, room, epoch)

	var logs syncBuffer
	c, reg := r.consumer(t, "c", func(c *consumer.Config) { c.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	drain(t, c)
	require.Equal(t, []string{
		fmt.Sprint(epoch, 1, "u1", "public", 1000, nil, nil, nil, nil, nil, nil, nil, nil),
		fmt.Sprint(epoch, 6, "u6", "public", 1000, nil, nil, nil, nil, nil, nil, nil, nil),
	}, entryRows(t, r.dsn, room))
	require.Equal(t, 6.0, metric(t, reg, "flashgate_journal_rejected_total", map[string]string{"room": room}))
	require.Zero(t, pending(t, r.rdb, room))
	require.Equal(t, 5, strings.Count(logs.String(), `"msg":"journal event rejected","consumer":"c","room":"`+room+`","id":"`+id+`","why":`))
	require.Contains(t, logs.String(), `"id":"`+emptyID+`","why":"a batch without events"`)
	for _, why := range []string{"batch event 2 has not 8 comma-separated fields", "batch event 3 has not 8",
		`batch event 4: seq \"three\" is not a decimal integer`, `batch event 5: \"config\" is not an entry event`,
		"entered without a user"} {
		require.Contains(t, logs.String(), why)
	}
}

// TestLargeReadIsWrittenInParts: a read whose batch entries hold more than
// MaxApply events is written in several transactions of at most MaxApply
// events, each entry's events in one, and acked once all are written.
func TestLargeReadIsWrittenInParts(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	room := redistest.Room("big")
	require.NoError(t, r.rdb.SAdd(ctx, consumer.RoomsKey, room).Err())
	for k := int64(0); k < 10; k++ { // 10 entries of 250 events: 1,000 + 1,000 + 500
		lines := make([]string, 250)
		for i := range lines {
			seq := 250*k + int64(i) + 1
			lines[i] = fmt.Sprintf("entered,%d,u%d,public,%d,,,", seq, seq, 1000*seq)
		}
		xaddBatch(t, r.rdb, room, epoch, lines...)
	}
	c, reg := r.consumer(t, "c", nil)
	require.True(t, c.Round(ctx))
	require.Equal(t, 2500, count(t, r.dsn, `SELECT count(*) FROM journal_entries WHERE room = $1`, room))
	require.Equal(t, 3.0, metric(t, reg, "flashgate_journal_apply_seconds", nil), "three transactions")
	require.Equal(t, 2500.0, metric(t, reg, "flashgate_journal_events_total", map[string]string{"room": room}))
	require.Zero(t, pending(t, r.rdb, room))
}
