package journal_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/journal"
)

// TestApplyWaits: the wait is reported once per entry, by whichever of its
// entered and admitted events is applied second, and again on a redelivery.
func TestApplyWaits(t *testing.T) {
	s, _ := store(t)
	ctx := context.Background()
	entered := journal.Event{ID: "1-0", Kind: journal.KindEntered, Room: "r", Epoch: epoch, Arrival: 1, User: "a", At: 1000}
	admitted := journal.Event{ID: "2-0", Kind: journal.KindAdmitted, Room: "r", Epoch: epoch, Arrival: 1, At: 4500,
		AdmissionID: epoch + ".1.1.4500"}
	w, err := s.ApplyWaits(ctx, []journal.Event{entered, admitted})
	require.NoError(t, err)
	require.Equal(t, []journal.Wait{{Room: "r", Epoch: epoch, Arrival: 1, Wait: 3500 * time.Millisecond,
		Estimate: -1}}, w, "no estimate journaled")

	e2, a2 := entered, admitted
	e2.Arrival, a2.Arrival, a2.AdmissionID = 2, 2, epoch+".2.2.4500"
	shown := 2 * time.Second
	e2.EstimatedWait = &shown
	w, err = s.ApplyWaits(ctx, []journal.Event{a2})
	require.NoError(t, err)
	require.Empty(t, w, "admitted before entered: no wait yet")
	w, err = s.ApplyWaits(ctx, []journal.Event{e2})
	require.NoError(t, err)
	require.Len(t, w, 1)
	require.Equal(t, 3500*time.Millisecond, w[0].Wait)
	require.Equal(t, shown, w[0].Estimate, "the shown estimate comes with the wait, whatever the order")
	w, err = s.ApplyWaits(ctx, []journal.Event{a2})
	require.NoError(t, err)
	require.Equal(t, shown, w[0].Estimate, "and from the row on a redelivery")

	w, err = s.ApplyWaits(ctx, []journal.Event{admitted})
	require.NoError(t, err)
	require.Len(t, w, 1, "a redelivery reports the wait again (documented)")
	completed := journal.Event{ID: "3-0", Kind: journal.KindCompleted, Room: "r", Epoch: epoch, Arrival: 1, At: 5000}
	w, err = s.ApplyWaits(ctx, []journal.Event{completed})
	require.NoError(t, err)
	require.Empty(t, w)
}
