package issuer

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer/store"
)

// Signer signs an admission token's claims (flashgate.Claims.JSON) as a
// compact JWS with the protected header flashgate.NewHeader(kid). keys.Ring
// and keys.FileRing implement it.
type Signer interface {
	Sign(payload []byte) (string, error)
}

// Config configures an Issuer. Zero values are safe defaults except Redis.
type Config struct {
	// Redis is the queue store. Required.
	Redis Redis
	// Signer mints admission tokens. Required for Exchange only.
	Signer Signer
	// Invites signs and verifies invites (invite.go); nil means the Signer,
	// when it implements InviteKeys (keys.Ring and keys.FileRing do).
	Invites InviteKeys
	// Issuer is the admission token's iss (default DefaultIssuer, "flashgate"),
	// and the iss of the invites it signs and accepts.
	Issuer string
	// Audience is the admission token's aud (default DefaultAudience, "orders").
	Audience string
	// WaitingSecret keys the waiting-token MAC; at least 32 bytes, the same on
	// every replica. Required for Enter, Status, Leave and Exchange (see
	// LoadOrCreateSecret).
	WaitingSecret []byte
	// SharedSecret says WaitingSecret came from LoadOrCreateSecret (the
	// fg:waiting-secret key) rather than from the operator: Run then keeps
	// this replica in step with that key (SyncSecret), so replicas converge
	// on one secret after a Redis data loss.
	SharedSecret bool
	// LotteryKey keys the pre-queue lottery's secrets (LotterySecret): held
	// by the issuer, never stored in Redis; the same on every replica (nil:
	// derived from WaitingSecret when that is the operator's, see
	// lotteryKeyOf).
	LotteryKey []byte
	// Beacon, when set, is the public randomness every shuffle room's draw
	// combines with its secret (a drand round after the opening, Beacon.Round);
	// nil: the seed is operator-chosen.
	Beacon *Beacon
	// DefaultRoom, when non-nil, creates unknown rooms on first Enter with
	// this policy. Nil: unknown rooms are refused with flashgate.ErrUnknownRoom.
	// Rooms created so (auto rooms, RoomConfig.Auto) are limited in number
	// (MaxAutoRooms) and deleted when idle (AutoRoomIdle).
	DefaultRoom *RoomConfig
	// MaxAutoRooms bounds the auto rooms that exist at once, across every
	// replica (a slot in fg:autorooms, reserved before an enter may create
	// the room): beyond it, an enter into an unknown room is refused with
	// flashgate.ErrRoomLimit. Zero means DefaultMaxAutoRooms (100);
	// NoAutoRoomLimit (any negative) no limit: what FLASHGATE_MAX_AUTO_ROOMS=off
	// maps to (and its deprecated 0). In a Go struct 0 is "not set", so it
	// takes the safe default.
	MaxAutoRooms int
	// AutoRoomIdle is how long an auto room may stay idle — nobody waiting,
	// no live admission, no time-dependent write — before the tick deletes
	// it (DeleteRoom's end, reason deleted) and frees its slot. Zero means
	// DefaultAutoRoomIdle (1 h); AutoRoomNeverIdle (any negative) never.
	// FLASHGATE_AUTO_ROOM_IDLE=off (and its deprecated 0) maps to
	// AutoRoomNeverIdle: in a Go struct 0 is "not set".
	AutoRoomIdle time.Duration
	// RoomRetention is how long a room's keys live after the room ends
	// (rooms whose RoomConfig.Retention is zero). Zero means
	// DefaultRoomRetention (24 h); else MinRetention … MaxRetention.
	RoomRetention time.Duration
	// LostRooms is what a replica does with a room it knew (and that had
	// not ended) when it finds the room's data lost from Redis (docs/operations.md
	// "Durability"): LostRoomsRecreate ("" too, the default) recreates it
	// empty from its last known config with a new epoch, at the next tick
	// or enter (recovery.go); LostRoomsAwaitRestore recreates nothing and
	// answers every call for the room flashgate.ErrRoomLost (503 room_lost,
	// Retry-After 2) until `flashgate restore` rebuilds it from the journal
	// with its old epoch (or an operator's SetRoom recreates it), so clients
	// that retry keep their place.
	LostRooms LostRoomPolicy
	// JournalMaxLen bounds each room's journal stream (fg:{room}:journal,
	// XADD MAXLEN ~, in stream entries: one per script call that changes
	// entries, holding up to 256 events, and one per config change;
	// docs/operations.md#durability), written into the config of every
	// room this Issuer creates or configures (journal_maxlen). The consumer
	// (`flashgate journal run`) trims what it has written, so the bound
	// matters only while it lags or is not running; past it the oldest
	// unread entries are lost to the journal. Zero means
	// DefaultJournalMaxLen (1,000,000: about 40 MB per room); NoJournal (any
	// negative) writes no journal: what FLASHGATE_JOURNAL_MAXLEN=off maps to
	// (and its deprecated 0). In a Go struct 0 is "not set".
	JournalMaxLen int64
	// IdleTickMax is the slowest Run ticks a room with nothing to do (nobody
	// waiting, nothing live, nothing to drain): its tick period doubles at
	// each idle tick up to this, and an enter through this Issuer wakes it
	// at once. Zero means DefaultIdleTickMax (10 s); negative ticks every
	// room at its configured tick.
	IdleTickMax time.Duration
	// Now, when set, is the clock used for queue scores and expiries (tests).
	// Nil means Redis TIME: one clock for every replica (package doc, "Time").
	Now func() time.Time
	// Logger receives tick-loop errors; nil means slog.Default().
	Logger *slog.Logger
	// StatusSnapshot, when positive, is the largest age of the per-room
	// snapshot from which Status answers waiting users far behind the head
	// (snapshot.go: an interpolated position, Entry.PositionEstimated, and
	// the estimate from the snapshot's figures), an opt-in for very large
	// lines (SuggestedStatusSnapshot, 500 ms, is a sound value). Zero (the
	// default) or negative: every Status runs the exact script (an exact
	// position and estimate).
	StatusSnapshot time.Duration
	// CompletionReplicas, when > 0, makes Complete and Revoke wait (Redis
	// WAIT, pipelined on the script's connection) until that many replicas
	// acknowledged the write, for at most CompletionTimeout (zero:
	// DefaultCompletionTimeout, 200 ms).
	// Fewer acknowledgements → flashgate.ErrUnavailable; the write stands on the master,
	// and a retry returns the first result (Repeated). This narrows what a
	// Sentinel failover can lose: an acknowledged completion is on a replica.
	// Needs a client with Pipeline() that talks to one master (*redis.Client,
	// including the Sentinel failover client), not a ClusterClient.
	CompletionReplicas int
	CompletionTimeout  time.Duration
	// ScriptBatch is the most items one coalesced script call carries:
	// concurrent Enter calls for a room are coalesced into one enter script
	// call while the previous one is in flight, and so are exact Status and
	// Exchange calls (one status script call, a claim flag per item) and
	// Complete calls (one complete script call) — each kind in its own
	// line, one call in flight per room and kind (batch.go). Zero means
	// EnterBatch, and when that is zero too DefaultScriptBatch (32); 1 turns
	// coalescing off (every call is its own script call); at most
	// MaxScriptBatch.
	ScriptBatch int
	// EnterBatch is the old name of ScriptBatch, read when ScriptBatch is 0.
	//
	// Deprecated: use ScriptBatch (it bounds every coalesced batch, not only
	// enters); kept for one release.
	EnterBatch int
}

// pipeliner is the optional capability CompletionReplicas needs.
type pipeliner interface {
	Pipeline() redis.Pipeliner
}

// Issuer is the wiring of the issuer's roles over one Redis gateway: the
// buyer's path (Queue), the admin (Admin), the ticker (Ticker) and what
// metrics read (Metrics), each a type of its own sharing the issuer's state.
// It declares no method: its methods are its roles', so it plays every role
// (package server takes the roles as interfaces, cmd/flashgate hands it
// Issuer.Queue, Issuer.Admin and Issuer.Metrics). It is safe for concurrent
// use, and any number of Issuers (replicas) may share one Redis.
//
// An Issuer never retains a caller's string beyond the call: what it keeps
// (room ids as keys of its per-room state, user ids queued for an enter
// script call) it copies first, so callers may pass strings that alias
// buffers they reuse, such as fiber's request values (invariant 7, docs/concepts.md#invariants).
type Issuer struct {
	*core
	*Queue
	*Admin
	*Ticker
	*Metrics
}

// Queue is the buyer's path: Enter, EnterWithInvite, Status, Leave,
// Exchange, Complete, CompleteMinted, CheckActive, and the reads the pages
// need (Room, RoomLottery, Knows, Directives, Ping, TokenClaims); each
// coalesced path has its own batcher (enter.go, status.go, complete.go).
type Queue struct{ *core }

// Admin is the admin: rooms (SetRoom, UpdateRoom, SetState, Close, SoldOut,
// DeleteRoom, Room, Rooms), bans, invites, the edge stop, revocation and
// the room journal's audit entries.
type Admin struct{ *core }

// Ticker is the ticker: admission (Tick, Run; the rate and capacity rule
// is lua/prelude_admission_rate.lua's, applied by lua/tick.lua), idle auto
// rooms (AutoRooms), recovery and the shared waiting-token secret
// (SyncSecret).
type Ticker struct{ *core }

// Metrics is what metrics read: a room's Stats under an exporter lease
// (ClaimExporter), the issuer's own counters (Observe), the tick observer
// (ObserveTicks).
type Metrics struct{ *core }

// core is the state the roles share: the config, the gateway, the
// per-room batchers, the known rooms, the counters.
type core struct {
	cfg    Config
	db     *store.Gateway // the scripts, one typed call each (issuer/store)
	policy string         // the default room policy (lua/prelude.lua ARGV[2]), or ""
	log    *slog.Logger
	snaps  snapshots
	// secrets holds the waiting-token secrets (nil without Config.WaitingSecret).
	secrets atomic.Pointer[secretSet]
	// known holds the last config this replica saw of each room (*knownRoom),
	// to restore a room lost with Redis's data (recovery.go).
	known sync.Map
	// restored counts rooms this replica restored (Observation.RoomsRestored).
	restored atomic.Int64
	// registered holds the rooms this process has added to fg:rooms.
	registered sync.Map
	// enterBatchers, statusBatchers and completeBatchers hold each room's
	// coalescer of that path (batch.go: enterBatch, statusBatch, completeBatch).
	enterBatchers, statusBatchers, completeBatchers sync.Map
	// batchStats count the coalesced script calls per kind and the items
	// they carried (Observation.Batches).
	batchStats struct{ enter, status, exchange, complete batchKind }
	// notes queues the minted notes for their writer (noteMinted), which
	// runs while noteWriter is set; minting counts the notes queued or being
	// written, mintedLost those that did not land.
	notes      chan mintedNote
	noteWriter atomic.Bool
	minting    sync.WaitGroup
	mintedLost atomic.Int64
	// idle holds the rooms Run is ticking slowly (nothing to do), as
	// *atomic.Bool: Enter wakes one (wake).
	idle sync.Map
	// wakeups receives the rooms to tick at once (Run reads it).
	wakeups chan string
	// ticks counts the room ticks Run has run (Observation.TickCalls).
	ticks atomic.Int64
	// tickObs is ObserveTicks's observer (nil: none).
	tickObs atomic.Pointer[TickObserver]
	// commitments caches each room's lottery commitment (*cachedCommitment,
	// receipt.go) for the receipts of its pre-queue entries.
	commitments sync.Map
	// lotteryKey is the key lottery secrets derive from (lottery_reveal.go
	// lotteryKeyOf); revealed the rooms whose lottery needed no reveal when
	// last read (room → time.Time of that read).
	lotteryKey []byte
	revealed   sync.Map
}

// Defaults and bounds of Config.
const (
	// DefaultIssuer and DefaultAudience are the admission token's iss and aud
	// when Config.Issuer and Config.Audience are empty.
	DefaultIssuer   = "flashgate"
	DefaultAudience = "orders"
	// DefaultCompletionTimeout is the default Config.CompletionTimeout.
	DefaultCompletionTimeout = 200 * time.Millisecond
	// SuggestedStatusSnapshot is a Config.StatusSnapshot for very large
	// lines (docs/rooms.md#estimated-wait): off by default, every status is exact.
	SuggestedStatusSnapshot = 500 * time.Millisecond
	// DefaultScriptBatch is the default Config.ScriptBatch: the most users
	// one enter script call carries (and tokens one status call, admissions
	// one complete call).
	DefaultScriptBatch = 32
	// MaxScriptBatch bounds Config.ScriptBatch: one script call blocks Redis
	// while it runs (about 3 µs per user), and Lua's unpack takes at most a
	// few thousand values.
	MaxScriptBatch = 1000
	// DefaultEnterBatch is DefaultScriptBatch.
	//
	// Deprecated: use DefaultScriptBatch; kept for one release.
	DefaultEnterBatch = DefaultScriptBatch
	// MaxEnterBatch is MaxScriptBatch.
	//
	// Deprecated: use MaxScriptBatch; kept for one release.
	MaxEnterBatch = MaxScriptBatch
	// MinWaitingSecret is the shortest Config.WaitingSecret, in bytes.
	MinWaitingSecret = 32
	// DefaultMaxAutoRooms, DefaultAutoRoomIdle and DefaultIdleTickMax are
	// the defaults of Config.MaxAutoRooms, AutoRoomIdle and IdleTickMax.
	DefaultMaxAutoRooms = 100
	DefaultAutoRoomIdle = time.Hour
	DefaultIdleTickMax  = 10 * time.Second
	// DefaultJournalMaxLen is the default Config.JournalMaxLen (stream
	// entries per room; the scripts' own default for a room config without
	// journal_maxlen).
	DefaultJournalMaxLen = 1_000_000
	// NoAutoRoomLimit, AutoRoomNeverIdle and NoJournal turn off
	// Config.MaxAutoRooms, AutoRoomIdle and JournalMaxLen: what the word off
	// means for their environment variables (FLASHGATE_MAX_AUTO_ROOMS,
	// FLASHGATE_AUTO_ROOM_IDLE, FLASHGATE_JOURNAL_MAXLEN), whereas a Config's
	// 0 means the default.
	NoAutoRoomLimit   = -1
	AutoRoomNeverIdle = -1 * time.Nanosecond
	NoJournal         = -1
)

// LostRoomPolicy is Config.LostRooms.
type LostRoomPolicy string

// The lost-room policies.
const (
	LostRoomsRecreate     LostRoomPolicy = "recreate"
	LostRoomsAwaitRestore LostRoomPolicy = "await-restore"
)

// journalMaxLen is Config.JournalMaxLen as the scripts read journal_maxlen:
// the bound, or 0 for no journal.
func (is *core) journalMaxLen() int64 {
	switch n := is.cfg.JournalMaxLen; {
	case n == 0:
		return DefaultJournalMaxLen
	case n < 0:
		return 0
	default:
		return n
	}
}

// Validate reports the first setting of c out of its bounds, as a
// flashgate.CodeInvalidInput error; zero values (defaults) pass. It does
// not need a connection: a nil Redis passes here (New refuses it), so a
// process can check its settings before it connects. With a Redis client
// set, it also checks that the client can do what CompletionReplicas needs.
func (c Config) Validate() error {
	if c.LostRooms != "" && c.LostRooms != LostRoomsRecreate && c.LostRooms != LostRoomsAwaitRestore {
		return flashgate.Errorf(flashgate.CodeInvalidInput, "issuer: LostRooms %q is not %q or %q", c.LostRooms,
			LostRoomsRecreate, LostRoomsAwaitRestore)
	}
	if c.WaitingSecret != nil && len(c.WaitingSecret) < MinWaitingSecret {
		return flashgate.Errorf(flashgate.CodeInvalidInput, "issuer: WaitingSecret must be at least %d bytes", MinWaitingSecret)
	}
	if c.CompletionReplicas > 0 && c.Redis != nil {
		if _, ok := c.Redis.(pipeliner); !ok {
			return flashgate.Errorf(flashgate.CodeInvalidInput, "issuer: CompletionReplicas needs a client with Pipeline()")
		}
		if _, cluster := c.Redis.(*redis.ClusterClient); cluster {
			return flashgate.Errorf(flashgate.CodeInvalidInput, "issuer: CompletionReplicas is not supported on Redis Cluster (WAIT is per node)")
		}
	}
	if c.ScriptBatch < 0 || c.ScriptBatch > MaxScriptBatch {
		return flashgate.Errorf(flashgate.CodeInvalidInput, "issuer: ScriptBatch must be 0 (default %d) … %d", DefaultScriptBatch, MaxScriptBatch)
	}
	if c.EnterBatch < 0 || c.EnterBatch > MaxScriptBatch {
		return flashgate.Errorf(flashgate.CodeInvalidInput, "issuer: EnterBatch (deprecated: ScriptBatch) must be 0 (default %d) … %d", DefaultScriptBatch, MaxScriptBatch)
	}
	if c.DefaultRoom != nil {
		if err := c.DefaultRoom.WithDefaults().Validate(); err != nil {
			return err
		}
	}
	if c.RoomRetention != 0 && !validRetention(c.RoomRetention) {
		return flashgate.Errorf(flashgate.CodeInvalidInput, "issuer: RoomRetention must be 0 (default %s) or %s … %s, whole milliseconds",
			DefaultRoomRetention, MinRetention, MaxRetention)
	}
	if c.AutoRoomIdle > 0 && c.AutoRoomIdle < time.Second {
		return flashgate.Errorf(flashgate.CodeInvalidInput, "issuer: AutoRoomIdle must be at least 1s (0: default %s; negative: never)", DefaultAutoRoomIdle)
	}
	return nil
}

// withDefaults returns c with every zero setting set to its default.
func (c Config) withDefaults() Config {
	if c.Issuer == "" {
		c.Issuer = DefaultIssuer
	}
	if c.Audience == "" {
		c.Audience = DefaultAudience
	}
	if c.CompletionReplicas > 0 && c.CompletionTimeout <= 0 {
		c.CompletionTimeout = DefaultCompletionTimeout
	}
	if c.ScriptBatch == 0 {
		c.ScriptBatch = c.EnterBatch
	}
	if c.ScriptBatch == 0 {
		c.ScriptBatch = DefaultScriptBatch
	}
	if c.MaxAutoRooms == 0 {
		c.MaxAutoRooms = DefaultMaxAutoRooms
	}
	if c.AutoRoomIdle == 0 {
		c.AutoRoomIdle = DefaultAutoRoomIdle
	}
	if c.RoomRetention == 0 {
		c.RoomRetention = DefaultRoomRetention
	}
	if c.IdleTickMax == 0 {
		c.IdleTickMax = DefaultIdleTickMax
	}
	return c
}

// New returns an Issuer, or a flashgate.CodeInvalidInput error for a bad
// Config (a nil Redis, or what Validate reports).
func New(cfg Config) (*Issuer, error) {
	if cfg.Redis == nil {
		return nil, flashgate.Errorf(flashgate.CodeInvalidInput, "issuer: Config.Redis is required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	is := &core{cfg: cfg, log: cfg.Logger, wakeups: make(chan string, 1024), notes: make(chan mintedNote, maxQueuedNotes)}
	is.db = store.New(cfg.Redis, store.Options{Now: cfg.Now, Replicas: cfg.CompletionReplicas,
		ReplicaTimeout: cfg.CompletionTimeout, Lost: is.lostRoom})
	if cfg.WaitingSecret != nil {
		is.secrets.Store(newSecretSet(cfg.WaitingSecret))
	}
	if is.log == nil {
		is.log = slog.Default()
	}
	is.lotteryKey = lotteryKeyOf(cfg, func(m string) { is.log.Warn(m) })
	if cfg.DefaultRoom != nil {
		d := cfg.DefaultRoom.WithDefaults()
		d.Auto = true
		is.policy = d.policy("-")
	}
	return &Issuer{core: is, Queue: &Queue{is}, Admin: &Admin{is}, Ticker: &Ticker{is}, Metrics: &Metrics{is}}, nil
}

// TokenClaims returns the iss and aud the admission tokens carry (after
// defaults), for verifiers in the same process.
func (is *Queue) TokenClaims() (iss, aud string) { return is.cfg.Issuer, is.cfg.Audience }

// now is the Issuer's clock on the Go side: Config.Now when set (tests),
// else the local clock. The scripts read Redis TIME unless Config.Now is
// set (nowArg).
func (is *core) now() time.Time {
	if is.cfg.Now != nil {
		return is.cfg.Now()
	}
	return time.Now()
}
