package issuer

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashgate/flashgate"
	"github.com/redis/go-redis/v9"
)

// Signer signs an admission token's claims (JSON) as a compact JWS with
// header {"alg":"EdDSA","kid":…,"typ":verifier.TokenType}. keys.Ring and
// keys.FileRing implement it.
type Signer interface {
	Sign(payload []byte) (string, error)
}

// Config configures an Issuer. Zero values are safe defaults except Redis.
type Config struct {
	// Redis is the queue store. Required.
	Redis Redis
	// Signer mints admission tokens. Required for Exchange only.
	Signer Signer
	// Issuer is the admission token's iss (default "flashgate").
	Issuer string
	// Audience is the admission token's aud (default "orders").
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
	// DefaultRoom, when non-nil, creates unknown rooms on first Enter with
	// this policy. Nil: unknown rooms are refused with flashgate.ErrUnknownRoom.
	DefaultRoom *RoomConfig
	// Now, when set, is the clock used for queue scores and expiries (tests).
	// Nil means Redis TIME: one clock for every replica (DESIGN.md).
	Now func() time.Time
	// Logger receives tick-loop errors; nil means slog.Default().
	Logger *slog.Logger
	// StatusSnapshot is the largest age of the per-room snapshot from which
	// Status answers waiting users far behind the head (snapshot.go); zero
	// means DefaultStatusSnapshot (500 ms), negative disables snapshots (every
	// Status runs the exact script).
	StatusSnapshot time.Duration
	// CompletionReplicas, when > 0, makes Complete and Revoke wait (Redis
	// WAIT, pipelined on the script's connection) until that many replicas
	// acknowledged the write, for at most CompletionTimeout (default 200 ms).
	// Fewer acknowledgements → flashgate.ErrUnavailable; the write stands on the master,
	// and a retry returns the first result (Repeated). This narrows what a
	// Sentinel failover can lose: an acknowledged completion is on a replica.
	// Needs a client with Pipeline() that talks to one master (*redis.Client,
	// including the Sentinel failover client), not a ClusterClient.
	CompletionReplicas int
	CompletionTimeout  time.Duration
	// EnterBatch is the most users one enter script call carries: concurrent
	// Enter calls for a room are coalesced into one call while the previous
	// one is in flight (batch.go). Zero means DefaultEnterBatch (32); 1 turns
	// coalescing off (every Enter is its own call); at most MaxEnterBatch.
	EnterBatch int
}

// pipeliner is the optional capability CompletionReplicas needs.
type pipeliner interface {
	Pipeline() redis.Pipeliner
}

// Issuer is the domain core: enter, status, leave, tick, exchange, complete,
// revoke and room administration, over Redis. It is safe for concurrent use,
// and any number of Issuers (replicas) may share one Redis.
//
// An Issuer never retains a caller's string beyond the call: what it keeps
// (room ids as keys of its per-room state, user ids queued for an enter
// script call) it copies first, so callers may pass strings that alias
// buffers they reuse, such as fiber's request values (DESIGN.md invariant 7).
type Issuer struct {
	cfg    Config
	policy string // the default room policy (lua/prelude.lua ARGV[2]), or ""
	log    *slog.Logger
	snaps  snapshots
	// secrets holds the waiting-token secrets (nil without Config.WaitingSecret).
	secrets atomic.Pointer[secretSet]
	// known holds the last config this replica saw of each room (*knownRoom),
	// to restore a room lost with Redis's data (recovery.go).
	known sync.Map
	// restored counts rooms this replica restored (RoomsRestored).
	restored atomic.Int64
	// registered holds the rooms this process has added to fg:rooms.
	registered sync.Map
	// batchers holds each room's *enterBatcher.
	batchers sync.Map
	// batchCalls and batchUsers count enter script calls and the users they
	// carried (EnterBatchStats).
	batchCalls, batchUsers atomic.Int64
}

// New returns an Issuer, or a flashgate.CodeInvalidInput error for a bad Config.
func New(cfg Config) (*Issuer, error) {
	if cfg.Redis == nil {
		return nil, flashgate.Errorf(flashgate.CodeInvalidInput, "issuer: Config.Redis is required")
	}
	if cfg.WaitingSecret != nil && len(cfg.WaitingSecret) < 32 {
		return nil, flashgate.Errorf(flashgate.CodeInvalidInput, "issuer: WaitingSecret must be at least 32 bytes")
	}
	if cfg.Issuer == "" {
		cfg.Issuer = "flashgate"
	}
	if cfg.Audience == "" {
		cfg.Audience = "orders"
	}
	if cfg.CompletionReplicas > 0 {
		if _, ok := cfg.Redis.(pipeliner); !ok {
			return nil, flashgate.Errorf(flashgate.CodeInvalidInput, "issuer: CompletionReplicas needs a client with Pipeline()")
		}
		if _, cluster := cfg.Redis.(*redis.ClusterClient); cluster {
			return nil, flashgate.Errorf(flashgate.CodeInvalidInput, "issuer: CompletionReplicas is not supported on Redis Cluster (WAIT is per node)")
		}
		if cfg.CompletionTimeout <= 0 {
			cfg.CompletionTimeout = 200 * time.Millisecond
		}
	}
	if cfg.StatusSnapshot == 0 {
		cfg.StatusSnapshot = DefaultStatusSnapshot
	}
	if cfg.EnterBatch == 0 {
		cfg.EnterBatch = DefaultEnterBatch
	}
	if cfg.EnterBatch < 0 || cfg.EnterBatch > MaxEnterBatch {
		return nil, flashgate.Errorf(flashgate.CodeInvalidInput, "issuer: EnterBatch must be 0 (default %d) … %d", DefaultEnterBatch, MaxEnterBatch)
	}
	is := &Issuer{cfg: cfg, log: cfg.Logger}
	if cfg.WaitingSecret != nil {
		is.secrets.Store(newSecretSet(cfg.WaitingSecret))
	}
	if is.log == nil {
		is.log = slog.Default()
	}
	if cfg.DefaultRoom != nil {
		d := cfg.DefaultRoom.WithDefaults()
		if err := d.Validate(); err != nil {
			return nil, err
		}
		is.policy = d.policy()
	}
	return is, nil
}

// TokenClaims returns the iss and aud the admission tokens carry (after
// defaults), for verifiers in the same process.
func (is *Issuer) TokenClaims() (iss, aud string) { return is.cfg.Issuer, is.cfg.Audience }

// LoadOrCreateSecret returns the waiting-token secret shared through Redis
// (key fg:waiting-secret), creating a random 32-byte one with SETNX if none
// exists, so every replica agrees without configuration. Pass it as
// Config.WaitingSecret with Config.SharedSecret set, so that Run keeps the
// replicas agreeing after Redis loses the key (SyncSecret).
//
// When the key is missing it first waits SecretGrace (1 s, two SyncSecret
// periods) and looks again: after a Redis data loss, replicas still running
// put their secret back within that time, and a replica starting then adopts
// it instead of inventing a second one (whose tokens the others would not
// know for up to a sync period). Only a first deployment pays the wait.
// Errors: flashgate.ErrUnavailable, flashgate.ErrInternal (a corrupt stored secret), ctx's.
func LoadOrCreateSecret(ctx context.Context, rdb Redis) ([]byte, error) {
	s, err := rdb.Get(ctx, keySecret).Result()
	if errors.Is(err, redis.Nil) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(SecretGrace):
		}
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		if err := rdb.SetNX(ctx, keySecret, base64.StdEncoding.EncodeToString(b[:]), 0).Err(); err != nil {
			return nil, unavailable(err)
		}
		s, err = rdb.Get(ctx, keySecret).Result()
	}
	if err != nil {
		return nil, unavailable(err)
	}
	return decodeSecret(s)
}

// SecretSyncEvery is how often Run calls SyncSecret (Config.SharedSecret),
// and SecretGrace how long LoadOrCreateSecret waits for a running replica
// to restore a lost shared secret before it creates one.
const (
	SecretSyncEvery = 500 * time.Millisecond
	SecretGrace     = 2 * SecretSyncEvery
)

// unavailable maps a failed Redis call: an OOM refusal (used memory over
// maxmemory; Redis refuses a script whose first write would allocate, and
// deny-oom commands) to flashgate.ErrStoreFull, anything else to flashgate.ErrUnavailable.
func unavailable(err error) error {
	if redis.HasErrorPrefix(err, "OOM") {
		return &flashgate.Error{Code: flashgate.CodeStoreFull, Message: "queue store full (Redis maxmemory): no new entries until memory is freed", Err: err}
	}
	return &flashgate.Error{Code: flashgate.CodeUnavailable, Message: "queue store unavailable", Err: err}
}

func (is *Issuer) nowArg() string {
	if is.cfg.Now == nil {
		return ""
	}
	return strconv.FormatInt(is.cfg.Now().UnixMilli(), 10)
}

// run executes a script for room and returns its reply, mapping
// {'ERROR', code} replies to domain errors and Redis failures to flashgate.ErrUnavailable.
func (is *Issuer) run(ctx context.Context, s *redis.Script, room string, args ...any) ([]any, error) {
	argv := append([]any{is.nowArg(), is.createArg(s, room)}, args...)
	res, err := s.Run(ctx, is.cfg.Redis, RoomKeys(room), argv...).Slice()
	return reply(res, err, room)
}

// reply maps a script's reply: Redis failures to flashgate.ErrUnavailable,
// {'ERROR', code} to the code's domain error.
func reply(res []any, err error, room string) ([]any, error) {
	if err != nil {
		return nil, unavailable(err)
	}
	if len(res) == 2 && res[0] == "ERROR" {
		code, _ := res[1].(string)
		return nil, scriptError(code, room)
	}
	return res, nil
}

// runReplicated is run followed, on the same connection, by WAIT for
// CompletionReplicas replicas (when configured).
func (is *Issuer) runReplicated(ctx context.Context, s *redis.Script, room string, args ...any) ([]any, error) {
	n := is.cfg.CompletionReplicas
	if n <= 0 {
		return is.run(ctx, s, room, args...)
	}
	argv := append([]any{is.nowArg(), is.createArg(s, room)}, args...)
	keys := RoomKeys(room)
	// exec pipelines the script (EVALSHA, or EVAL after NOSCRIPT) and WAIT,
	// since WAIT only counts the writes of its own connection.
	exec := func(eval func(redis.Scripter) *redis.Cmd) ([]any, int64, error) {
		p := is.cfg.Redis.(pipeliner).Pipeline()
		c := eval(p)
		w := p.Do(ctx, "WAIT", n, is.cfg.CompletionTimeout.Milliseconds())
		_, _ = p.Exec(ctx)
		res, err := c.Slice()
		if err != nil {
			return nil, 0, err
		}
		acks, err := w.Int64()
		return res, acks, err
	}
	res, acks, err := exec(func(p redis.Scripter) *redis.Cmd { return s.EvalSha(ctx, p, keys, argv...) })
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		res, acks, err = exec(func(p redis.Scripter) *redis.Cmd { return s.Eval(ctx, p, keys, argv...) })
	}
	if res, err = reply(res, err, room); err != nil {
		return nil, err
	}
	if acks < int64(n) {
		return nil, &flashgate.Error{Code: flashgate.CodeUnavailable, Message: fmt.Sprintf(
			"write acknowledged by %d of %d replicas within %s; retry (a retry returns the first result)",
			acks, n, is.cfg.CompletionTimeout)}
	}
	return res, nil
}

// Entry is a client's view of its place: the answer of Enter and Status.
type Entry struct {
	Room         string
	User         string
	State        flashgate.State
	WaitingToken string
	// Arrival is the entry's arrival number in its room (1, 2, …): FIFO order.
	Arrival int64
	// Position is the 1-based place in line (WAITING only); Ahead = Position − 1.
	Position int64
	// PositionEstimated is true when Position was interpolated from the
	// replica's room snapshot rather than counted (ZRANK); see snapshot.go.
	PositionEstimated bool
	Ahead             int64
	TotalWaiting      int64
	// EstimatedWait is Ahead at the room's admission rate (seed 002:
	// ahead × 60 s / rate); −1 while the room is paused or closed.
	EstimatedWait time.Duration
	// PollAfter is when the client should ask again, with ±20 % jitter so
	// waiting clients do not poll in lock-step (seed 001, adaptive polling).
	PollAfter time.Duration
	// AdmissionID is the jti (ACTIVE, EXPIRED; COMPLETED/REVOKED when known).
	AdmissionID string
	// AdmissionNumber is the admission order number (1, 2, …) in the room.
	AdmissionNumber int64
	AdmittedAt      time.Time
	// ExpiresAt is the admission's expiry (ACTIVE, EXPIRED), millisecond precision.
	ExpiresAt time.Time
	// EndedAt is when the entry was completed, revoked or found expired.
	EndedAt   time.Time
	RoomState RoomState
	// Created is true when this Enter created the room from the default policy.
	Created bool
}

func asInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

func asString(v any) string {
	s, _ := v.(string)
	return s
}

// entry builds an Entry from a script result; tok is the caller's verified
// waiting token for this entry, or "" to mint it.
func (is *Issuer) entry(room, user, tok string, r scriptEntry) *Entry {
	e := &Entry{
		Room: room, User: user,
		State:        r.state,
		Arrival:      r.seq,
		Position:     r.pos,
		TotalWaiting: r.total,
		AdmissionID:  r.jti,
		Created:      r.created,
		RoomState:    r.roomState,
	}
	at := r.at
	if e.AdmissionID != "" {
		if id, ok := flashgate.ParseAdmissionID(e.AdmissionID); ok {
			e.AdmissionNumber, e.AdmittedAt = id.Number, id.AdmittedAt
		}
	}
	switch e.State {
	case flashgate.StateActive:
		e.ExpiresAt = time.UnixMilli(at)
	case flashgate.StateExpired, flashgate.StateCompleted, flashgate.StateRevoked:
		e.EndedAt = time.UnixMilli(at)
	}
	rate := r.rate
	if e.State == flashgate.StateWaiting {
		e.Ahead = e.Position - 1
		e.EstimatedWait = -1
		if e.RoomState == RoomOpen && rate > 0 {
			e.EstimatedWait = time.Duration(float64(e.Ahead) * float64(time.Minute) / float64(rate))
		}
		e.PollAfter = pollAfter(e.EstimatedWait)
	}
	switch {
	case tok != "":
		e.WaitingToken = tok
	case e.Arrival > 0 && r.epoch != "":
		if s := is.secrets.Load(); s != nil {
			e.WaitingToken = s.current.token(room, user, r.epoch, e.Arrival)
		}
	}
	return e
}

// pollAfter chooses the next poll: half the estimated wait, clamped to
// 1 s … 30 s (10 s while paused), times a uniform jitter in [0.8, 1.2).
func pollAfter(eta time.Duration) time.Duration {
	base := 10 * time.Second
	if eta >= 0 {
		base = min(max(eta/2, time.Second), 30*time.Second)
	}
	return time.Duration(float64(base) * (0.8 + 0.4*mrand.Float64())).Round(time.Millisecond)
}

func (is *Issuer) needSecret() error {
	if is.secrets.Load() == nil {
		return flashgate.Errorf(flashgate.CodeInternal, "issuer: Config.WaitingSecret is not set")
	}
	return nil
}

// Enter puts user in room's line, or returns the entry the user already has
// (WAITING or ACTIVE) — idempotent, so refreshes and retries never create a
// second place (invariant 1). When nobody waits and capacity and rate allow,
// the user is admitted at once (fast track, seed 000).
//
// Enter keeps copies of room (the room's enter batcher, the registered
// rooms) and, while user waits for an enter script call, of user; the
// returned Entry holds the caller's strings.
//
// Errors: flashgate.ErrInvalidInput (ids), flashgate.ErrUnknownRoom, flashgate.ErrRoomClosed, flashgate.ErrUnavailable,
// flashgate.ErrStoreFull (Redis is over maxmemory and refuses the new entry).
func (is *Issuer) Enter(ctx context.Context, room, user string) (*Entry, error) {
	if err := checkRoom(room); err != nil {
		return nil, err
	}
	if err := checkUser(user); err != nil {
		return nil, err
	}
	if err := is.needSecret(); err != nil {
		return nil, err
	}
	var r scriptEntry
	var err error
	if is.cfg.EnterBatch == 1 {
		var rs []scriptEntry
		if rs, err = is.enterUsers(ctx, room, user); err == nil {
			r = rs[0]
		}
	} else {
		r, err = is.batcher(room).enter(ctx, user)
	}
	if err != nil {
		return nil, err
	}
	e := is.entry(room, user, "", r)
	if e.Created {
		is.noteCreated(room)
	}
	// Register the room with the tick loops (fg:rooms; another slot, so not in
	// the script). Not only when this call created it: a retried first enter
	// answers created=0, and the room would then never be ticked. Once per
	// process per room, and again whenever a script (re)creates it.
	if _, known := is.registered.Load(room); e.Created || !known {
		if err := is.cfg.Redis.SAdd(ctx, keyRooms, room).Err(); err != nil {
			return nil, unavailable(err)
		}
		is.registered.Store(strings.Clone(room), struct{}{}) // kept: a copy (invariant 7)
	}
	return e, nil
}

// Status reports the entry behind a waiting token: WAITING (position, ahead,
// estimate, poll hint), ACTIVE (expiry), EXPIRED, COMPLETED, REVOKED or
// NOT_FOUND (left, or superseded by a newer entry). Users far behind the head
// are answered from the replica's room snapshot (PositionEstimated; a token
// whose owner left may then still read WAITING until the line reaches it).
// Status keeps a copy of room as the key of the replica's snapshot; the
// returned Entry holds the caller's strings.
//
// Errors: flashgate.ErrInvalidInput, flashgate.ErrBadWaiting (not a waiting token),
// flashgate.ErrOwnerMismatch (another user's token), flashgate.ErrUnknownRoom, flashgate.ErrUnavailable.
func (is *Issuer) Status(ctx context.Context, room, user, waitingToken string) (*Entry, error) {
	ref, err := is.checkWaiting(room, user, waitingToken)
	if err != nil {
		if errors.Is(err, errUnknownSecret) {
			return is.notFound(room, user, waitingToken, ref.seq), nil
		}
		return nil, err
	}
	if e := is.fromSnapshot(ctx, room, user, waitingToken, ref); e != nil {
		return e, nil
	}
	return is.exactStatus(ctx, room, user, waitingToken, ref)
}

// notFound is the NOT_FOUND entry, as the status script reports it: what a
// waiting token whose entry (arrival seq) is gone — left, superseded, or lost
// with Redis's data — reads; the client enters again.
func (is *Issuer) notFound(room, user, tok string, seq int64) *Entry {
	return &Entry{Room: room, User: user, State: flashgate.StateNotFound, WaitingToken: tok, Arrival: seq}
}

// exactStatus runs the status script for a verified waiting token. A room
// lost with Redis's data that this replica knew reads NOT_FOUND (the entry is
// gone; the client's next enter restores the room), not flashgate.ErrUnknownRoom.
func (is *Issuer) exactStatus(ctx context.Context, room, user, tok string, ref waitingRef) (*Entry, error) {
	r, err := is.run(ctx, statusScript, room, user, ref.seq, ref.epoch)
	if err != nil {
		if errors.Is(err, flashgate.ErrUnknownRoom) && is.knows(room) {
			return is.notFound(room, user, tok, ref.seq), nil
		}
		return nil, err
	}
	return is.entry(room, user, tok, statusResult(r)), nil
}

func (is *Issuer) checkWaiting(room, user, tok string) (waitingRef, error) {
	if err := checkRoom(room); err != nil {
		return waitingRef{}, err
	}
	if err := checkUser(user); err != nil {
		return waitingRef{}, err
	}
	if err := is.needSecret(); err != nil {
		return waitingRef{}, err
	}
	return is.secrets.Load().parse(room, user, tok)
}

// Leave removes the waiting entry, or ends the live admission, behind a
// waiting token, and the user index. Errors as Status, plus flashgate.ErrNotFound when
// there is nothing to leave (a repeated leave).
func (is *Issuer) Leave(ctx context.Context, room, user, waitingToken string) error {
	ref, err := is.checkWaiting(room, user, waitingToken)
	if err != nil {
		return err
	}
	r, err := is.run(ctx, leaveScript, room, user, ref.seq, ref.epoch)
	if errors.Is(err, flashgate.ErrUnknownRoom) && is.knows(room) {
		return flashgate.Errorf(flashgate.CodeNotFound, "no live entry to leave: room %q lost its data", room)
	}
	if err != nil {
		return err
	}
	if asString(r[0]) != "LEFT" {
		return flashgate.Errorf(flashgate.CodeNotFound, "no live entry to leave")
	}
	return nil
}

// Admission is a minted admission token and what it carries.
type Admission struct {
	Token     string    // compact JWS
	ID        string    // jti
	Room      string    // product claim
	User      string    // sub
	Number    int64     // admission order number
	IssuedAt  time.Time // iat (second precision)
	ExpiresAt time.Time // exp (second precision, = the active entry's expiry, floored)
}

// Exchange trades an ACTIVE entry's waiting token for an admission token
// (EdDSA JWT, exp = the active entry's expiry). Re-minting the same admission
// gives the same jti and exp (and, with the same key, the same token).
//
// Errors: those of Status, plus flashgate.ErrNotAdmitted (still waiting; its
// *flashgate.Error.Entry is the WAITING entry), flashgate.ErrExpired,
// flashgate.ErrCompleted, flashgate.ErrRevoked, flashgate.ErrNotFound, flashgate.ErrInternal (no signer, sign failure).
func (is *Issuer) Exchange(ctx context.Context, room, user, waitingToken string) (*Admission, error) {
	ref, err := is.checkWaiting(room, user, waitingToken)
	if err != nil {
		return nil, err
	}
	e, err := is.exactStatus(ctx, room, user, waitingToken, ref)
	if err != nil {
		return nil, err
	}
	switch e.State {
	case flashgate.StateActive:
	case flashgate.StateWaiting:
		return nil, &NotAdmittedError{Entry: e, Err: flashgate.Errorf(flashgate.CodeNotAdmitted,
			"not admitted yet: position %d of %d", e.Position, e.TotalWaiting)}
	case flashgate.StateExpired:
		return nil, flashgate.Errorf(flashgate.CodeExpired, "admission expired")
	case flashgate.StateCompleted:
		return nil, flashgate.Errorf(flashgate.CodeCompleted, "admission already completed")
	case flashgate.StateRevoked:
		return nil, flashgate.Errorf(flashgate.CodeRevoked, "admission revoked")
	default:
		return nil, flashgate.Errorf(flashgate.CodeNotFound, "no entry for this waiting token")
	}
	if is.cfg.Signer == nil {
		return nil, flashgate.Errorf(flashgate.CodeInternal, "issuer: Config.Signer is not set")
	}
	a := &Admission{ID: e.AdmissionID, Room: room, User: user, Number: e.AdmissionNumber,
		IssuedAt:  time.Unix(e.AdmittedAt.Unix(), 0),
		ExpiresAt: time.Unix(e.ExpiresAt.Unix(), 0)}
	payload := flashgate.NewClaims(is.cfg.Issuer, is.cfg.Audience, user, room, a.ID, a.IssuedAt, a.ExpiresAt).JSON()
	if a.Token, err = is.cfg.Signer.Sign(payload); err != nil {
		return nil, &flashgate.Error{Code: flashgate.CodeInternal, Message: "sign admission token", Err: err}
	}
	return a, nil
}

// Complete consumes an admission atomically: still active and unexpired →
// consumed, and the user may queue again. Callers pass the claims of an
// admission token they have verified (verifier.Verify): room = product,
// user = sub, admissionID = jti. Replay protection keys on jti, never on the
// token string.
//
// Errors: flashgate.ErrInvalidInput, flashgate.ErrUnknownRoom, flashgate.ErrExpired, flashgate.ErrRevoked,
// flashgate.ErrNotFound (unknown, left), flashgate.ErrOwnerMismatch, flashgate.ErrUnavailable.
func (is *Issuer) Complete(ctx context.Context, room, user, admissionID string) (*flashgate.Completion, error) {
	if err := checkRoom(room); err != nil {
		return nil, err
	}
	if err := checkUser(user); err != nil {
		return nil, err
	}
	if _, ok := flashgate.ParseAdmissionID(admissionID); !ok {
		return nil, flashgate.Errorf(flashgate.CodeNotFound, "unknown admission id %q", clip(admissionID))
	}
	r, err := is.runReplicated(ctx, completeScript, room, user, admissionID)
	if err != nil {
		return nil, err
	}
	return &flashgate.Completion{AdmissionID: admissionID, CompletedAt: time.UnixMilli(asInt(r[1])), Repeated: asInt(r[2]) == 1}, nil
}

// CheckActive asks Redis (one ZSCORE, and the room's clock) whether the
// admission admissionID in room is still live: nil if so; ErrNotFound when it
// is no longer in the active set (revoked, completed, left, or expired and
// cleaned up), ErrExpired when it has lapsed by the room's clock (Redis TIME,
// or Config.Now when set — never the caller's clock), ErrInvalidInput for a
// malformed room id, ErrUnavailable when Redis cannot answer (fail closed).
func (is *Issuer) CheckActive(ctx context.Context, room, admissionID string) error {
	if err := checkRoom(room); err != nil {
		return err
	}
	if _, ok := flashgate.ParseAdmissionID(admissionID); !ok {
		return flashgate.Errorf(flashgate.CodeNotFound, "unknown admission id %q", clip(admissionID))
	}
	r, err := is.run(ctx, activeScript, room, admissionID)
	if err != nil {
		return err
	}
	if asString(r[0]) != "ACTIVE" {
		if asString(r[0]) == "EXPIRED" {
			return flashgate.Errorf(flashgate.CodeExpired, "admission expired")
		}
		return flashgate.Errorf(flashgate.CodeNotFound, "admission %q is no longer active", clip(admissionID))
	}
	return nil
}

// Revocation is the result of Revoke.
type Revocation struct {
	AdmissionID string
	RevokedAt   time.Time
	Repeated    bool
}

// Revoke ends an admission early, named by admission id (jti) or by user
// (their current admission). Later completions of its token are refused;
// the user may queue again. Errors: flashgate.ErrInvalidInput, flashgate.ErrUnknownRoom,
// flashgate.ErrNotFound, flashgate.ErrCompleted, flashgate.ErrUnavailable.
func (is *Issuer) Revoke(ctx context.Context, room, user, admissionID string) (*Revocation, error) {
	if err := checkRoom(room); err != nil {
		return nil, err
	}
	if user == "" && admissionID == "" {
		return nil, flashgate.Errorf(flashgate.CodeInvalidInput, "revoke needs a user or an admission id")
	}
	if user != "" {
		if err := checkUser(user); err != nil {
			return nil, err
		}
	}
	if admissionID != "" {
		if _, ok := flashgate.ParseAdmissionID(admissionID); !ok {
			return nil, flashgate.Errorf(flashgate.CodeNotFound, "unknown admission id %q", clip(admissionID))
		}
	}
	r, err := is.runReplicated(ctx, revokeScript, room, user, admissionID)
	if err != nil {
		return nil, err
	}
	return &Revocation{AdmissionID: asString(r[3]), RevokedAt: time.UnixMilli(asInt(r[1])), Repeated: asInt(r[2]) == 1}, nil
}

// MaxTickPerCall is the most admissions, and the most lapsed-admission
// expiries, one tick script call performs. A script call blocks Redis while
// it runs (about 10 µs per admitted user: 1,000 users ≈ 10 ms, README
// "Measurements"), so Tick runs a room's batch in calls of at most this many.
const MaxTickPerCall = 1000

// TickResult is what one admission step (one Tick, however many script
// calls it took) did.
type TickResult struct {
	Admitted int           // moved from waiting to active, all calls together
	Expired  int           // lapsed admissions dropped, all calls together
	Active   int           // live admissions after the step
	Waiting  int           // entries still waiting after the step
	Tick     time.Duration // the room's configured tick
}

// Tick runs one bounded admission step for room: drop lapsed admissions,
// then admit min(capacity − live, rate budget, batch) from the head of the
// line. The room's batch (up to 10,000) is worked off in script calls of at
// most MaxTickPerCall admissions and MaxTickPerCall expiries each, so no
// call blocks Redis for long; every call enforces capacity, rate and what is
// left of the batch itself, and Tick calls again only while the previous
// call used a whole bound (so a batch that is a multiple of MaxTickPerCall
// ends with a call that finds it spent). Any number of replicas may tick the
// same room concurrently. When ctx ends or a call fails after earlier calls
// of the step succeeded, Tick returns what those did along with the error.
func (is *Issuer) Tick(ctx context.Context, room string) (TickResult, error) {
	if err := checkRoom(room); err != nil {
		return TickResult{}, err
	}
	var res TickResult
	for {
		r, err := is.run(ctx, tickScript, room, MaxTickPerCall, res.Admitted, res.Expired)
		if err != nil {
			return res, err
		}
		if err := is.noteTick(ctx, room, r); err != nil {
			return res, err
		}
		admitted, expired := int(asInt(r[0])), int(asInt(r[1]))
		res.Admitted += admitted
		res.Expired += expired
		res.Active, res.Waiting = int(asInt(r[2])), int(asInt(r[3]))
		res.Tick = time.Duration(asInt(r[4])) * time.Millisecond
		// A call that did less than its bound found nothing more to do (or
		// reached the batch, capacity or rate): the step is complete.
		if admitted < MaxTickPerCall && expired < MaxTickPerCall {
			return res, nil
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
	}
}

// Ping checks that Redis answers and takes writes (readiness): one SET NX of
// a small expiring key, which Redis refuses while its used memory is over
// maxmemory, as it refuses new entries. Errors: flashgate.ErrUnavailable, flashgate.ErrStoreFull.
func (is *Issuer) Ping(ctx context.Context) error {
	if err := is.cfg.Redis.SetNX(ctx, keyReady, "1", time.Minute).Err(); err != nil {
		return unavailable(err)
	}
	return nil
}
