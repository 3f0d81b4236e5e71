package journal_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/journal"
)

// readmeSQL returns the ```sql blocks of docs/operations.md's "### Asking
// the journal" subsection, as written.
func readmeSQL(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "docs", "operations.md"))
	require.NoError(t, err)
	_, sec, ok := strings.Cut(string(data), "\n### Asking the journal\n")
	require.True(t, ok, "docs/operations.md has no ### Asking the journal")
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	if i := strings.Index(sec, "\n### "); i >= 0 {
		sec = sec[:i]
	}
	var blocks []string
	for {
		_, rest, ok := strings.Cut(sec, "\n```sql\n")
		if !ok {
			return blocks
		}
		body, after, ok := strings.Cut(rest, "\n```")
		require.True(t, ok, "an unterminated ```sql block")
		blocks = append(blocks, body)
		sec = after
	}
}

// TestREADMEReconciliation runs the orders table of docs/operations.md and its two
// reconciliation queries, as written, over a journal written by Apply.
func TestREADMEReconciliation(t *testing.T) {
	blocks := readmeSQL(t)
	require.Len(t, blocks, 3, "the orders table, orders without a completion, completions without an order")
	_, dsn := store(t)
	s, err := journal.Open(context.Background(), dsn)
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()

	id := func(arrival int64) string {
		return flashgate.AdmissionID{Epoch: epoch, Arrival: arrival, Number: arrival, AdmittedAt: time.UnixMilli(1000 + arrival)}.String()
	}
	var evs []journal.Event
	buyer := func(arrival int64, end journal.Kind, reason string) {
		evs = append(evs,
			journal.Event{Kind: journal.KindEntered, Room: "sale", Epoch: epoch, Arrival: arrival, User: fmt.Sprint("u", arrival), At: 500},
			journal.Event{Kind: journal.KindAdmitted, Room: "sale", Epoch: epoch, Arrival: arrival, At: 1000 + arrival, AdmissionID: id(arrival)})
		if end != "" {
			evs = append(evs, journal.Event{Kind: end, Room: "sale", Epoch: epoch, Arrival: arrival, At: 5000 + arrival, Reason: reason})
		}
	}
	buyer(1, journal.KindCompleted, "")            // completed, ordered: fine
	buyer(2, journal.KindCompleted, "")            // completed, no order
	buyer(3, journal.KindExpired, "session_ended") // an order on an expired admission
	buyer(4, "", "")                               // live, no order yet: fine
	buyer(5, journal.KindCompleted, "")            // completed, ordered under another product: both lists
	require.NoError(t, s.Apply(ctx, evs))

	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, blocks[0])
	require.NoError(t, err, "docs/operations.md orders table:\n%s", blocks[0])
	for _, o := range [][2]string{{"sale", id(1)}, {"sale", id(3)}, {"sale", epoch + ".99.99.1099"}, {"other", id(5)}} {
		_, err = conn.Exec(ctx, `INSERT INTO orders (product, admission_id) VALUES ($1, $2)`, o[0], o[1])
		require.NoError(t, err)
	}

	rows := func(q string) []string {
		t.Helper()
		rs, err := conn.Query(ctx, q)
		require.NoError(t, err, "docs/operations.md query:\n%s", q)
		var out []string
		for rs.Next() {
			v, err := rs.Values()
			require.NoError(t, err)
			out = append(out, fmt.Sprint(v))
		}
		require.NoError(t, rs.Err())
		return out
	}
	row := func(v ...any) string { return fmt.Sprint([]any(v)) }
	require.Equal(t, []string{
		row("other", id(5), nil, nil, nil), // ordered under a product the journal has no such admission in
		row("sale", id(3), "u3", "expired", "session_ended"),
		row("sale", epoch+".99.99.1099", nil, nil, nil), // an admission the journal never saw
	}, rows(blocks[1]))
	require.Equal(t, []string{
		row("sale", id(2), "u2", int64(5002)),
		row("sale", id(5), "u5", int64(5005)),
	}, rows(blocks[2]))
}
