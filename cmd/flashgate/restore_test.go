package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/pgtest"
	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/journal"
)

// TestRestoreCommand: `flashgate restore` reads the journal named by
// FLASHGATE_JOURNAL_DSN and writes the room into REDIS_URL's Redis, prints
// its summary; a second run is refused (exit 1), -h goes to stdout, a
// missing --room is a usage error.
func TestRestoreCommand(t *testing.T) {
	r := runCLI(t, "", "restore", "-h")
	assert.Equal(t, exitOK, r.code)
	assert.Contains(t, r.stdout, "Usage")
	assert.Contains(t, r.stdout, "-dry-run")
	assert.Empty(t, r.stderr)

	dsn := pgtest.Start(t).NewDatabase(t)
	ctx := context.Background()
	require.NoError(t, journal.Migrate(ctx, dsn))
	store, err := journal.Open(ctx, dsn)
	require.NoError(t, err)
	defer store.Close()
	const epoch = "ab12cd34ef"
	evs := []journal.Event{{ID: "1-0", Kind: journal.KindConfig, Room: "shop", Epoch: epoch, At: 1000, Action: "create",
		Detail: `{"state":"open","capacity":"2","rate":"60","session_ms":"600000","batch":"10","tick_ms":"1000","epoch":"` + epoch + `"}`}}
	for i, u := range []string{"ann", "ben", "cid"} {
		evs = append(evs, journal.Event{Kind: journal.KindEntered, Room: "shop", Epoch: epoch, Arrival: int64(i + 1), User: u, Lane: "public", At: 2000})
	}
	require.NoError(t, store.Apply(ctx, evs))

	srv := redistest.Start(t)
	t.Setenv("REDIS_URL", "redis://"+srv.Addr+"/0")
	t.Setenv("FLASHGATE_JOURNAL_DSN", dsn)
	assert.Equal(t, exitUsage, runCLI(t, "", "restore").code, "no --room")

	r = runCLI(t, "", "restore", "--room", "shop", "--dry-run")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "3 entries to restore")
	assert.Zero(t, srv.Client(t).Exists(ctx, "fg:{shop}:config").Val(), "a dry run writes nothing")

	r = runCLI(t, "", "restore", "--room", "shop")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "epoch "+epoch+", waiting 3, priority 0, live 0, ended 0, seq 3")
	assert.Equal(t, []string{"ann", "ben", "cid"}, srv.Client(t).ZRange(ctx, "fg:{shop}:waiting", 0, -1).Val())

	r = runCLI(t, "", "restore", "--room", "shop")
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "has entries in the queue store")
}
