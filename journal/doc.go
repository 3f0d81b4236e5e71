// Package journal is flashgate's durable record in PostgreSQL (issue 12): every
// state change of an entry and every room config change or admin action,
// written from the rooms' Redis Streams, so that "was this buyer admitted,
// did they order, why did it end" outlives Redis.
//
// This package holds the schema, its migrations and the store: Migrate
// applies the schema, Store.Apply writes a batch of Events idempotently,
// Store.Entry answers for one buyer; Store.Report (a room's outcome counts
// and wait percentiles) and Store.RoomEvents (its config changes and admin
// actions) answer for a room (query.go). The stream producer (the issuer's
// scripts) and the consumer process (package journal/consumer, `flashgate
// journal run`) are built on it.
//
// # Delivery
//
// The consumer reads a stream with a consumer group: at-least-once, and
// events of one entry may reach PostgreSQL out of order (two consumers, a
// retried batch). Apply is therefore idempotent and order-insensitive per
// entry: every column of an entry's row is a function of the set of events
// applied, not of their order or count (see upsertEntry in store.go). Ack
// stream entries only after Apply returns nil.
//
// # The stream
//
// A script call journals the entry events it makes as one stream entry,
// kind "batch" (KindBatch): one XADD per call, not per buyer. StreamEvents
// reads it, and the one-entry-per-event layout of streams written before
// (docs/operations.md#durability). The events of a batch entry share its
// stream id; they are keyed by (room, epoch, arrival) like any entry
// event, so a redelivered batch writes nothing new.
//
// # Schema (migrations/00001_journal.sql, 00002_metrics.sql)
//
// journal_entries: one row per entry, keyed by (room, epoch, arrival). The
// epoch (invariant 6, docs/concepts.md#invariants) separates a room's lines before
// and after a Redis data loss, whose arrival numbers restart at 1. Times are
// bigint milliseconds since 1970 by the room's clock, as the scripts write
// them; NULL means "not journaled (yet)".
//
//	room, epoch, arrival  the key; arrival is the entry's place in arrival order (≥ 1)
//	user_id               the buyer (set by entered; any event may carry it)
//	lane                  public | priority | bypass
//	entered_ms            entered
//	admitted_ms           admitted
//	admission_id          the admission's jti "<epoch>.<arrival>.<admission>.<admitted_ms>":
//	                      the key orders are reconciled on (indexed)
//	exchanged_ms          the waiting token was exchanged for the admission
//	ended_ms, end_kind    completed | revoked | expired | left | closed, and when;
//	end_reason            e.g. not_claimed (expired), sold_out|closed|event_ended|deleted (closed)
//	                      (the scripts journal no event per entry a closed line drains: the
//	                      room's config event with closed_seq and ended_ms, action end, closes
//	                      every entry up to closed_seq never admitted: closeLine in store.go)
//	updated_at            when the row last changed (the database's clock)
//	estimated_wait_ms     the estimate the enter reply showed (entered's eta; NULL: none)
//	admission_no          admission_id's admission number: the room's admission order
//	                      (00002_metrics.sql)
//
// Indexed by (room, user_id) for Store.Entry; admitted entries by (room, epoch,
// lane, arrival), (room, epoch, lane, admission_no) and (room, epoch,
// admitted_ms) for ApplyChecked's inversion and rate checks.
//
// journal_room_events: room config changes (kind "config") and admin actions
// (kind "audit"), keyed by (room, epoch, stream_id), the Redis Stream entry id,
// so a redelivered event inserts nothing: at_ms, actor, action and detail
// (jsonb: the new config, or the action's arguments). Indexed by (room, at_ms).
//
// journal_schema_version: goose's record of applied migrations.
//
// # Migrations
//
// The migrations are SQL files embedded in the binary (embed.FS) and applied
// by github.com/pressly/goose/v3, chosen over golang-migrate because it takes
// a *sql.DB (here pgx v5's database/sql adapter, so pgx is the one driver),
// reads an fs.FS directly, has a Provider API without global state, and
// serialises concurrent migrators (several journal processes starting at
// once) with a PostgreSQL advisory lock; golang-migrate needs a driver and a
// source adapter per backend and its own dirty-state recovery. A migration
// runs in a transaction, so a failed one leaves the schema as it was.
// New migrations are new files (00002_….sql): never edit an applied one.
package journal
