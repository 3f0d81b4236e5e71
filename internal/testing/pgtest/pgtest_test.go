package pgtest

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { Main(m) }

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// A shared cluster answers on its DSN, is the same cluster on every call, and
// hands out isolated databases that are dropped when their test ends.
func TestSharedClusterAndDatabases(t *testing.T) {
	s := Shared(t)
	require.Same(t, s, Shared(t))
	require.Equal(t, "postgres://postgres@127.0.0.1:"+strconv.Itoa(s.Port)+"/postgres?sslmode=disable", s.DSN)

	var version string
	require.NoError(t, connect(t, s.DSN).QueryRow(context.Background(), "SHOW server_version").Scan(&version))
	require.True(t, strings.HasPrefix(version, "1"), "server_version %q", version)
	var fsync string
	require.NoError(t, connect(t, s.DSN).QueryRow(context.Background(), "SHOW fsync").Scan(&fsync))
	require.Equal(t, "off", fsync)

	var names []string
	for i := 0; i < 2; i++ {
		t.Run("db", func(t *testing.T) {
			dsn := s.NewDatabase(t)
			conn := connect(t, dsn)
			var name string
			require.NoError(t, conn.QueryRow(context.Background(), "SELECT current_database()").Scan(&name))
			names = append(names, name)
			// Empty: the other subtest's table is not here.
			var n int
			require.NoError(t, conn.QueryRow(context.Background(),
				"SELECT count(*) FROM pg_tables WHERE tablename = 'mine'").Scan(&n))
			require.Zero(t, n)
			_, err := conn.Exec(context.Background(), "CREATE TABLE mine (x int)")
			require.NoError(t, err)
		})
	}
	require.Len(t, names, 2)
	require.NotEqual(t, names[0], names[1])
	var left int
	require.NoError(t, connect(t, s.DSN).QueryRow(context.Background(),
		"SELECT count(*) FROM pg_database WHERE datname = ANY($1)", names).Scan(&left))
	require.Zero(t, left, "databases of finished tests are dropped")
}

// Start gives a cluster of its own that is gone after Stop, directory and all.
func TestStartStop(t *testing.T) {
	s := Start(t)
	require.NotEqual(t, Shared(t).Port, s.Port)
	connect(t, s.DSN)
	s.Stop()
	_, err := pgx.Connect(context.Background(), s.DSN)
	require.Error(t, err)
	require.NoDirExists(t, s.Dir)
	s.Stop() // idempotent
}

func TestDBNameFitsIdentifier(t *testing.T) {
	n := dbName("TestSomething/with a very long subtest name, punctuation & CAPS—and more text beyond 63")
	require.LessOrEqual(t, len(n), 63)
	require.Regexp(t, `^t_[a-z0-9_]+_[0-9a-f]{8}$`, n)
	require.NotEqual(t, n, dbName("TestSomething/with a very long subtest name, punctuation & CAPS—and more text beyond 63"))
}
