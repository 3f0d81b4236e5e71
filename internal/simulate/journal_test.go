package simulate_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/simulate"
	"github.com/flashgate/flashgate/internal/testing/pgtest"
	"github.com/flashgate/flashgate/internal/testing/redistest"
)

// TestRunWithJournal: Options.Journal (make run --journal) runs the journal
// process next to the in-process issuer — here on the embedded miniredis,
// make run's default store — and the report says what the journal holds:
// the same entries, admissions and orders as the issuer counted.
func TestRunWithJournal(t *testing.T) {
	// A password in the URL (the test cluster trusts loopback, so any will
	// do): the report must not show it.
	dsn := strings.Replace(pgtest.Start(t).NewDatabase(t), "postgres://postgres@", "postgres://postgres:s3cret@", 1)
	require.Contains(t, dsn, "s3cret")
	o := small()
	o.Users = 200
	o.Journal = dsn
	o.Room = redistest.Room("journaled")
	r, err := simulate.Run(context.Background(), o)
	require.NoError(t, err)
	var text bytes.Buffer
	require.NoError(t, r.WriteText(&text))
	t.Logf("\n%s", text.String())
	require.NotNil(t, r.Journal)
	require.NotNil(t, r.Journal.Report, r.Journal.Disagrees)
	assert.True(t, r.Journal.Agrees, r.Journal.Disagrees)
	assert.True(t, r.OK, "violations %v", r.Violations)
	assert.EqualValues(t, o.Users, r.Journal.Report.Entered)
	assert.EqualValues(t, r.Completed, r.Journal.Report.Completed)
	assert.Positive(t, r.Journal.Report.Wait.Admitted, "waits measured")
	// The journal process's accuracy and fairness figures (issue 26 §2).
	assert.Positive(t, r.Journal.Report.Estimate.Admitted, "estimates shown on entering, compared with the waits")
	assert.Zero(t, r.Journal.Inversions+r.Journal.RateOvershoots+r.Journal.CapacityOvershoots)
	assert.Regexp(t, `journal metrics: estimate error \|error\| p50 \S+ p90 \S+, bias \S+ \(\d+ admissions shown one\); `+
		`inversions 0, rate overshoots 0, capacity overshoots 0`, text.String())
	assert.Contains(t, text.String(), "agrees with the issuer's counters")
	assert.NotContains(t, r.Journal.Store, "s3cret", "no password in the report")
	assert.NotContains(t, text.String(), "s3cret")

	// A second run into the same journal: its report is of its own epoch.
	r2, err := simulate.Run(context.Background(), o)
	require.NoError(t, err)
	require.NotNil(t, r2.Journal.Report)
	assert.True(t, r2.Journal.Agrees, r2.Journal.Disagrees)
	assert.NotEqual(t, r.Journal.Report.Epoch, r2.Journal.Report.Epoch)

	o.IssuerURL, o.AdminToken = "http://127.0.0.1:1", "x"
	_, err = simulate.Run(context.Background(), o)
	assert.ErrorContains(t, err, "in-process issuer", "the journal needs the in-process issuer")
}
