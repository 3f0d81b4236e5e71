// Package issuer is flashgate's domain core: the waiting room over Redis,
// with no HTTP in it (package server is the HTTP layer).
//
// # Operations
//
// Every operation on a room is one Lua script (lua/*.lua, the prelude's
// definitions it uses prepended), called through the Redis gateway
// issuer/store (one typed Go call per script), atomic, idempotent under
// go-redis retries and bounded:
//
//	Enter     join the line, or get the entry one already has (fast track to ACTIVE when nobody waits)
//	EnterWithInvite  join the priority lane with an invite (Invites signs them), or be admitted at once (bypass)
//	Status    WAITING (position, estimate, poll hint), ACTIVE, EXPIRED, COMPLETED, REVOKED or NOT_FOUND
//	Leave     give up a place or end a live admission
//	Tick      drop lapsed admissions, admit min(capacity − live, rate budget, batch) from the head
//	          of the priority lane, then of the public line
//	Exchange  mint the admission token (EdDSA JWT, exp = the admission's expiry) for an ACTIVE entry
//	Complete  consume an admission once (the order service's call); a repeat returns the first result
//	Revoke    end an admission (operator); by user, also ban the user (RevokeWith: how long; default the session)
//	Ban       remove a user's waiting entry (it reads REVOKED), revoke their admission, refuse their enters until a time
//	Unban     lift a ban; Bans lists the bans in effect
//
// plus room administration (SetRoom, Room, SetState, Rooms, Stats), the
// issuer's own counters (Observe: one Observation) and the
// active check CheckActive (the order side, package order, calls Complete and
// CheckActive).
// Run ticks every registered room until its context ends; any number of Issuers
// (replicas) may share one Redis, and the rate budget lives in Redis, so
// three replicas ticking at once admit no more than one would.
//
// # Roles and files
//
// The issuer is a type per role over one shared state (core, over the Redis
// gateway issuer/store): Queue (the buyer's path), Admin, Ticker and
// Metrics; Issuer only wires them (New). The files are split by role
// (docs/architecture.md#the-issuers-files-by-role; "Walk of one enter"
// follows one Enter through them):
//
//	wiring      config.go (Config, New, Issuer and the role types, core, the clock),
//	            room.go (RoomConfig, id checks, Room, Rooms), errors.go
//	Queue       enter.go (Enter, its coalescer enterBatch and send enterUsers),
//	            entry.go (the Entry: the wait estimate, the poll hint, the waiting token),
//	            status.go (Status, its coalescer statusBatch, Leave), snapshot.go (status of long lines),
//	            admission.go (Exchange, Complete, its coalescer completeBatch, CheckActive,
//	            Revoke, minted notes), admissions.go (Admissions, the order side's role)
//	coalescer   batch.go (the generic group commit each path's coalescer is)
//	gateway     scripts.go (the Redis interface, the lost-room rule), replies.go (the
//	            gateway's other typed replies as the issuer's values); the scripts themselves:
//	            package issuer/store (store/<name>.go calls lua/<name>.lua) and issuer/lua
//	Admin       admin.go (SetRoom, UpdateRoom, Close, SoldOut, DeleteRoom, SetState),
//	            bans.go, invite.go, stop.go, lottery.go, receipt.go, audit.go (room policies)
//	Ticker      ticker.go (Tick, Run, the drain, idle rooms), autorooms.go (the slots of
//	            fg:autorooms), recovery.go (last known configs, restore after a data loss),
//	            restore.go (Restore), secret.go (LoadOrCreateSecret, SyncSecret)
//	Metrics     metrics.go (Observe, Stats, ClaimExporter, ObserveTicks, ScriptName)
//
// # Data model
//
// Every key of a room carries the hash tag {room} (lua/prelude.lua lists them), so each
// script touches one Redis Cluster slot. A waiting user is one member of the
// room's waiting ZSET (user → arrival number from the room's counter); the
// waiting token "fgw2_<sid>_<epoch>_<arrival>_<mac>" is an HMAC over room, user, epoch and arrival
// (Config.WaitingSecret) and is never stored. See docs/operations.md#redis-data-model.
//
// # Coalescing
//
// Concurrent Enter calls for a room share one script call (batch.go, group
// commit): the first to find the room idle goes at once, and calls arriving
// while it is in flight go together in the next, up to Config.ScriptBatch, in
// arrival order. The script enters them one after another, so the result is
// that of sequential enters. Exact
// Status and Exchange calls share status script calls the same way (a claim
// flag per token), and Complete calls complete script calls: each item is
// answered exactly as one call of its own would answer it, in queue order,
// its own refusal reaching its caller alone, and a whole-call failure every
// caller of the batch. Observe().Batches reports calls and items per kind.
//
// # Time
//
// One clock for every replica: Redis TIME (Config.Now injects one in
// tests), never earlier than the latest time a time-dependent write of the
// room recorded, so skewed replicas or a Redis clock stepping back never run
// a room's time backwards.
//
// # Errors
//
// Errors are *flashgate.Error values with a Code (errors.go); compare with errors.Is
// against the Err… sentinels. Redis failures are flashgate.ErrUnavailable (retry;
// nothing is half-written), except Redis refusing a write for memory (over
// maxmemory): flashgate.ErrStoreFull, met by what allocates (a new entry, a room's
// configuration); completion, leave, revocation and the tick free memory
// before they allocate any, so they keep working, and so do reads. A
// script's refusal is its own code (flashgate.ErrUnknownRoom,
// flashgate.ErrRoomClosed, flashgate.ErrNotAdmitted, …). Package server maps codes to HTTP
// statuses in one table.
package issuer
