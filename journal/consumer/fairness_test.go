package consumer_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/journal/consumer"
)

// xaddEntered appends an entered event with the estimate the buyer was
// shown (eta, ms; "" for none), in the scripts' layout.
func xaddEntered(t *testing.T, rdb redis.Cmdable, room string, seq int64, lane string, at int64, eta string) {
	t.Helper()
	require.NoError(t, rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: consumer.StreamKey(room), Values: []any{
		"kind", "entered", "epoch", epoch, "seq", strconv.FormatInt(seq, 10), "user", fmt.Sprint("u", seq),
		"lane", lane, "at", strconv.FormatInt(at, 10), "admission", "", "reason", "", "eta", eta}}).Err())
}

// xaddAdmitted appends entry seq's admission number no, at.
func xaddAdmitted(t *testing.T, rdb redis.Cmdable, room string, seq, no int64, lane string, at int64) {
	t.Helper()
	xaddEntry(t, rdb, room, "admitted", epoch, seq, "", lane, at, fmt.Sprintf("%s.%d.%d.%d", epoch, seq, no, at), "")
}

// admitAll admits the public entries seqs at at, in that order, with the
// admission numbers from, from+1, … (first entering 1 … n at 1000·seq).
func admitAll(t *testing.T, rdb redis.Cmdable, room string, n, at, from int64, seqs ...int64) {
	t.Helper()
	for seq := int64(1); seq <= n; seq++ {
		xaddEntered(t, rdb, room, seq, "public", 1000*seq, "")
	}
	for i, seq := range seqs {
		xaddAdmitted(t, rdb, room, seq, from+int64(i), "public", at)
	}
}

// The journal process's accuracy and fairness series, from hand-written
// journal streams: the estimate error (absolute, and the bias split in its
// over and under parts) of each admission shown an estimate; a public line
// admitted out of arrival order counts its inversions, a lottery's drawn
// pre-queue in any order among itself does not (admitted after a later
// arrival it does); admissions beyond the rate in 60 s, or beyond the
// capacity live, count as overshoots. A clean room moves none of the
// must-be-0 counters.
func TestConsumerFairnessMetrics(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	clean, fifo, lottery, fast := redistest.Room("clean"), redistest.Room("fifo"), redistest.Room("lot"), redistest.Room("fast")
	full := redistest.Room("full")
	require.NoError(t, r.rdb.SAdd(ctx, consumer.RoomsKey, clean, fifo, lottery, fast, full).Err())
	for _, room := range []string{clean, fast} {
		xaddRoom(t, r.rdb, room, "config", epoch, 500, "", "create", `{"capacity":"100","rate":"3","prequeue":"off"}`)
	}
	xaddRoom(t, r.rdb, fifo, "config", epoch, 500, "", "create", `{"capacity":"100","rate":"60","prequeue":"off"}`)
	xaddRoom(t, r.rdb, lottery, "config", epoch, 500, "", "create", `{"capacity":"100","rate":"60","prequeue":"shuffle"}`)

	// clean: shown 5 s, waited 8 s (3 s under); shown 4 s, waited 3 s (1 s
	// over); a fast track (no estimate); all in order, 3 in 60 s.
	xaddEntered(t, r.rdb, clean, 1, "public", 1000, "5000")
	xaddEntered(t, r.rdb, clean, 2, "public", 6000, "4000")
	xaddAdmitted(t, r.rdb, clean, 1, 1, "public", 9000)
	xaddAdmitted(t, r.rdb, clean, 2, 2, "public", 9000)
	xaddEntered(t, r.rdb, clean, 3, "public", 70000, "")
	xaddAdmitted(t, r.rdb, clean, 3, 3, "public", 70000)

	// fifo: 1, 2, 3 enter; 3 is admitted first, then 1 and 2: two pairs
	// out of order ((3,1), (3,2)); the priority lane is its own line.
	xaddEntered(t, r.rdb, fifo, 4, "priority", 4000, "")
	xaddAdmitted(t, r.rdb, fifo, 4, 1, "priority", 100000)
	admitAll(t, r.rdb, fifo, 3, 100000, 2, 3, 1, 2)

	// lottery: 1 … 3 in the pre-queue (cutoff 3), drawn 3, 1, 2; then 4
	// arrives. 4 admitted before 2 is one inversion; 3, 1 none.
	xaddRoom(t, r.rdb, lottery, "config", epoch, 900, "", "draw", `{"rate":"60","prequeue":"shuffle","lottery_cutoff":"3"}`)
	admitAll(t, r.rdb, lottery, 4, 20000, 1, 3, 1, 4, 2)

	// fast: rate 3 a minute, 5 admissions within 50 s (in order): the 4th
	// finds 1 too many in its 60 s, the 5th 2; a 6th at 100 s none.
	for seq := int64(1); seq <= 6; seq++ {
		at := 1000 + 10000*(seq-1)
		if seq == 6 {
			at = 100000
		}
		xaddEntered(t, r.rdb, fast, seq, "public", at, "")
		xaddAdmitted(t, r.rdb, fast, seq, seq, "public", at)
	}

	// full: capacity 2, sessions of 60 s. 3 admitted while 1 and 2 are live
	// is 1 beyond; 4 after 1 and 2 completed is not, nor 5 after the
	// sessions of 3 and 4 lapsed (no expired event journaled yet).
	xaddRoom(t, r.rdb, full, "config", epoch, 500, "", "create", `{"capacity":"2","rate":"100","session_ms":"60000"}`)
	for seq, at := range map[int64]int64{1: 1000, 2: 2000, 3: 3000, 4: 5000, 5: 70000} {
		xaddEntered(t, r.rdb, full, seq, "public", at, "")
	}
	for seq, at := range []int64{0, 1000, 2000, 3000} {
		if seq > 0 {
			xaddAdmitted(t, r.rdb, full, int64(seq), int64(seq), "public", at)
		}
	}
	for seq := int64(1); seq <= 2; seq++ {
		xaddEntry(t, r.rdb, full, "completed", epoch, seq, "", "", 4000, "", "")
	}
	xaddAdmitted(t, r.rdb, full, 4, 4, "public", 5000)
	xaddAdmitted(t, r.rdb, full, 5, 5, "public", 70000)

	c, reg := r.consumer(t, "c1", nil)
	drain(t, c)

	errs := map[string]string{"room": clean}
	assert.Equal(t, 2.0, metric(t, reg, "flashgate_estimate_error_seconds", errs), "two admissions were shown an estimate")
	assert.Equal(t, 3.0, metric(t, reg, "flashgate_estimate_under_seconds_total", errs), "5 s shown, 8 s waited")
	assert.Equal(t, 1.0, metric(t, reg, "flashgate_estimate_over_seconds_total", errs), "4 s shown, 3 s waited")
	assert.Equal(t, 3.0, metric(t, reg, "flashgate_wait_seconds", errs), "every wait, estimate or not")

	for room, want := range map[string]float64{clean: 0, fifo: 2, lottery: 1, fast: 0} {
		assert.Equal(t, want, metric(t, reg, "flashgate_order_inversions_total", map[string]string{"room": room}), "inversions in %s", room)
	}
	assert.Zero(t, metric(t, reg, "flashgate_order_inversions_total", map[string]string{"lane": "priority"}))
	for room, want := range map[string]float64{clean: 0, fifo: 0, lottery: 0, fast: 3, full: 0} {
		assert.Equal(t, want, metric(t, reg, "flashgate_rate_overshoot_total", map[string]string{"room": room}), "rate overshoots in %s", room)
	}
	for room, want := range map[string]float64{clean: 0, fifo: 0, lottery: 0, fast: 0, full: 1} {
		assert.Equal(t, want, metric(t, reg, "flashgate_capacity_overshoot_total", map[string]string{"room": room}), "capacity overshoots in %s", room)
	}
	assert.Zero(t, metric(t, reg, "flashgate_journal_limit_checks_skipped_total", nil))
	// The must-be-0 counters export a series once they move: /metrics lists them.
	n, err := testutil.GatherAndCount(reg, "flashgate_order_inversions_total", "flashgate_rate_overshoot_total", "flashgate_capacity_overshoot_total",
		"flashgate_estimate_error_seconds", "flashgate_estimate_over_seconds_total", "flashgate_estimate_under_seconds_total")
	require.NoError(t, err)
	assert.Positive(t, n)
}

// An overshoot found while an earlier entry of the stream is still pending
// on another journal process is dropped and counted as skipped: the end
// that freed the slot may be in that entry.
func TestConsumerOvershootNeedsTheEarlierEntriesWritten(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	room := redistest.Room("skip")
	require.NoError(t, r.rdb.SAdd(ctx, consumer.RoomsKey, room).Err())
	xaddEntered(t, r.rdb, room, 3, "public", 400, "") // pending on another process (its row could end 1)
	xaddRoom(t, r.rdb, room, "config", epoch, 500, "", "create", `{"capacity":"1","rate":"100","session_ms":"60000"}`)
	xaddEntered(t, r.rdb, room, 1, "public", 1000, "")
	xaddEntered(t, r.rdb, room, 2, "public", 1000, "")
	xaddAdmitted(t, r.rdb, room, 1, 1, "public", 1000)
	xaddAdmitted(t, r.rdb, room, 2, 2, "public", 2000) // beyond capacity 1 (as far as the journal knows)
	key := consumer.StreamKey(room)
	require.NoError(t, r.rdb.XGroupCreate(ctx, key, consumer.Group, "0").Err())
	require.NoError(t, r.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: consumer.Group, Consumer: "slow",
		Streams: []string{key, ">"}, Count: 1}).Err())

	c, reg := r.consumer(t, "c1", nil)
	drain(t, c)
	assert.Zero(t, metric(t, reg, "flashgate_capacity_overshoot_total", nil))
	assert.Equal(t, 1.0, metric(t, reg, "flashgate_journal_limit_checks_skipped_total", map[string]string{"room": room}))
}
