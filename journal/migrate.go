package journal

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// VersionTable is the table goose records applied migrations in (instead of
// its default goose_db_version, so the journal can share a database).
const VersionTable = "journal_schema_version"

// lockID is the PostgreSQL advisory lock (pg_advisory_lock) that serialises
// journal processes migrating the same database at once: "flashgt" in ASCII,
// not goose's default, so another goose user of the database does not wait
// on us.
const lockID int64 = 0x666c61736867740

// Migrate brings the journal schema at dsn (a PostgreSQL URL or key=value
// DSN, as pgx parses it) up to the newest migration embedded in this package
// (journal/migrations). Idempotent: with nothing pending it changes nothing.
// Concurrent callers are serialised by a session advisory lock; a caller
// waits for it up to 5 minutes (goose's lock probe: every 5 s, 60 times).
// Errors: an unparsable DSN, an unreachable server, or the failing
// migration's SQL error (its transaction is rolled back).
func Migrate(ctx context.Context, dsn string) error {
	db, err := openSQL(dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	p, err := provider(db)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("journal: migrate: %w", err)
	}
	return nil
}

// SchemaVersion returns the newest applied migration's version at dsn (0:
// none) and the newest this build embeds.
func SchemaVersion(ctx context.Context, dsn string) (current, latest int64, err error) {
	db, err := openSQL(dsn)
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	p, err := provider(db)
	if err != nil {
		return 0, 0, err
	}
	current, latest, err = p.GetVersions(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("journal: schema version: %w", err)
	}
	return current, latest, nil
}

func openSQL(dsn string) (*sql.DB, error) {
	cfg, err := pgxConfig(dsn)
	if err != nil {
		return nil, err
	}
	return stdlib.OpenDB(*cfg.ConnConfig), nil
}

func provider(db *sql.DB) (*goose.Provider, error) {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(lockID))
	if err != nil {
		return nil, err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, sub,
		goose.WithTableName(VersionTable), goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return nil, fmt.Errorf("journal: migrations: %w", err)
	}
	return p, nil
}
