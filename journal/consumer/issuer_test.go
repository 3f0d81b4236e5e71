package consumer_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/keys"
)

// TestConsumerReadsTheIssuersJournal: a small sale run by the real issuer
// (its scripts XADD the journal) — two buyers admitted at once, one
// completes, one leaves the line, the sold-out drains the rest — is
// written by the consumer without a rejected entry: every row and the
// room's config events land, and the wait histogram observes the admitted.
func TestConsumerReadsTheIssuersJournal(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	ring, err := keys.Generate(time.Now())
	require.NoError(t, err)
	is, err := issuer.New(issuer.Config{Redis: r.rdb, Signer: ring, WaitingSecret: bytes.Repeat([]byte{7}, 32)})
	require.NoError(t, err)
	room := redistest.Room("sale")
	_, err = is.SetRoom(ctx, room, issuer.RoomConfig{Capacity: 2, RatePerMinute: 600})
	require.NoError(t, err)
	var entries []*issuer.Entry
	for i := 1; i <= 5; i++ {
		e, err := is.Enter(ctx, room, fmt.Sprintf("u%d", i))
		require.NoError(t, err)
		entries = append(entries, e)
	}
	require.Equal(t, flashgate.StateActive, entries[0].State)
	require.Equal(t, flashgate.StateActive, entries[1].State)
	_, err = is.Complete(ctx, room, "u1", entries[0].AdmissionID)
	require.NoError(t, err)
	require.NoError(t, is.Leave(ctx, room, "u5", entries[4].WaitingToken))
	_, err = is.SoldOut(ctx, room)
	require.NoError(t, err)
	_, err = is.Tick(ctx, room) // drains the line of a sold-out room
	require.NoError(t, err)

	c, reg := r.consumer(t, "c", nil)
	drain(t, c)
	require.Equal(t, 0.0, metric(t, reg, "flashgate_journal_rejected_total", nil))
	require.Zero(t, pending(t, r.rdb, room))
	require.Equal(t, 5, count(t, r.dsn, `SELECT count(*) FROM journal_entries WHERE room = $1 AND entered_ms IS NOT NULL`, room))
	require.Equal(t, 1, count(t, r.dsn, `SELECT count(*) FROM journal_entries WHERE room = $1 AND user_id = 'u1'
		AND admission_id = $2 AND end_kind = 'completed'`, room, entries[0].AdmissionID))
	require.Equal(t, 1, count(t, r.dsn, `SELECT count(*) FROM journal_entries WHERE room = $1 AND user_id = 'u5' AND end_kind = 'left'`, room))
	// The sold-out's drain journals one 'end' config event, not an entry
	// event per drained entry (issuer/lua/drain.lua); its closed_seq closes
	// the two still waiting (journal's closeLine).
	require.Equal(t, 2, count(t, r.dsn, `SELECT count(*) FROM journal_entries WHERE room = $1 AND end_kind = 'closed'
		AND end_reason = 'sold_out' AND admitted_ms IS NULL`, room))
	require.Equal(t, 1, count(t, r.dsn, `SELECT count(*) FROM journal_room_events WHERE room = $1 AND kind = 'config'
		AND action = 'end'`, room))
	require.Equal(t, 2.0, metric(t, reg, "flashgate_wait_seconds", map[string]string{"room": room}))
}
