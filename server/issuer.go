package server

import (
	"context"
	"reflect"
	"time"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/issuer"
)

// Issuer is everything the handlers call on the domain core: Options.Issuer
// takes it rather than *issuer.Issuer, so the server's reach into the core is
// this list and nothing else (docs/architecture.md#architecture).
// It is three roles: Queue (the buyer's path), Admin (the admin API and its
// journal) and Observed (what /metrics reads), played by the issuer's role
// types issuer.Queue, issuer.Admin and issuer.Metrics (cmd/flashgate wires
// them; *issuer.Issuer, which embeds them all, plays all three too).
type Issuer interface {
	Queue
	Admin
	Observed
}

// Queue is the buyer's path: join, poll, leave, exchange, complete, and the
// room reads the pages, rate limits and readiness need.
type Queue interface {
	Enter(ctx context.Context, room, user string) (*issuer.Entry, error)
	EnterWithInvite(ctx context.Context, room, user, invite string) (*issuer.Entry, error)
	Status(ctx context.Context, room, user, waitingToken string) (*issuer.Entry, error)
	// News and StatusFrom feed the room's event streams from one read per
	// room and replica (server/roomnews.go).
	News(ctx context.Context, room string, every time.Duration) (*issuer.RoomNews, error)
	StatusFrom(ctx context.Context, n *issuer.RoomNews, room, user, waitingToken string) (*issuer.Entry, bool, error)
	Leave(ctx context.Context, room, user, waitingToken string) error
	Exchange(ctx context.Context, room, user, waitingToken string) (*issuer.Admission, error)
	Complete(ctx context.Context, room, user, admissionID string) (*flashgate.Completion, error)
	CompleteMinted(ctx context.Context, room, user, admissionID, token string) (*flashgate.Completion, error)
	Knows(room string) bool
	Room(ctx context.Context, room string) (issuer.RoomConfig, error)
	RoomLottery(ctx context.Context, room string) (*issuer.RoomLottery, error)
	// RoomBeacon reads and signs the room beacon (server/roombeacon.go).
	RoomBeacon(ctx context.Context, room string, ttl, near time.Duration) (flashgate.BeaconClaims, string, error)
	Directives(ctx context.Context) (map[string]int64, error)
	Ping(ctx context.Context) error
	TokenClaims() (iss, aud string)
	WaitMinted(ctx context.Context) error
}

// Admin is the admin API: rooms, bans, invites, revocation, the edge stop,
// and the room journal's audit entries.
type Admin interface {
	Rooms(ctx context.Context) ([]string, error)
	UpdateRoom(ctx context.Context, room string, patch issuer.RoomPatch) (cfg issuer.RoomConfig, created bool, err error)
	SetState(ctx context.Context, room string, s issuer.RoomState) (issuer.RoomConfig, error)
	Close(ctx context.Context, room, reason string) (issuer.RoomConfig, error)
	SoldOut(ctx context.Context, room string) (issuer.RoomConfig, error)
	DeleteRoom(ctx context.Context, room string) (issuer.RoomConfig, error)
	Stop(ctx context.Context, room string) (issuer.StopResult, error)
	Ban(ctx context.Context, room, user string, d time.Duration, reason string) (*issuer.Ban, error)
	Bans(ctx context.Context, room, cursor string, limit int) (*issuer.BanPage, error)
	Unban(ctx context.Context, room, user string) error
	Invites(room string, o issuer.InviteOptions) ([]issuer.Invite, error)
	RevokeWith(ctx context.Context, room, user, admissionID string, o issuer.RevokeOptions) (*issuer.Revocation, error)
	JournalAudit(ctx context.Context, room string, a issuer.Audit) (bool, error)
}

// Observed is what /metrics (and the admin API's room stats) read: per-room
// stats under an exporter lease, the issuer's own counters as one snapshot
// (Observe: batching, restores, minted notes), and the tick observer.
type Observed interface {
	Stats(ctx context.Context, room string) (*issuer.Stats, error)
	ClaimExporter(ctx context.Context, room, replica string, lease time.Duration) (bool, error)
	Observe() issuer.Observation
	ObserveTicks(f issuer.TickObserver)
}

// nilIssuer reports whether is is nil or a nil pointer of any
// implementation (New refuses both) without naming one: the server knows
// the roles, cmd/flashgate wires the issuer's role types to them.
func nilIssuer(is Issuer) bool {
	if is == nil {
		return true
	}
	v := reflect.ValueOf(is)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
