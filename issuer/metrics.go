package issuer

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate"
	"github.com/flashgate/flashgate/internal/roomkey"
)

// scriptNames maps each script's SHA-1 (what EVALSHA carries) to its name
// (the lua/ file it comes from), for ScriptName.
var scriptNames = map[string]string{}

func init() {
	for name, s := range map[string]*redis.Script{
		"enter": enterScript, "status": statusScript, "leave": leaveScript, "complete": completeScript,
		"active": activeScript, "revoke": revokeScript, "tick": tickScript, "stats": statsScript,
		"snapshot": snapshotScript, "ban": banScript, "unban": unbanScript, "bans": bansScript,
		"configure": configureScript, "drain": drainScript, "autoroom": autoRoomScript,
		"invite": inviteScript, "exporter": exporterScript, "restore": restoreScript, "minted": mintedScript,
	} {
		scriptNames[s.Hash()] = name
	}
}

// ScriptNames returns the names ScriptName answers, sorted.
func ScriptNames() []string {
	out := make([]string, 0, len(scriptNames))
	for _, n := range scriptNames {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// ScriptName names the flashgate script whose SHA-1 (lowercase hex, as
// EVALSHA sends it) is sha: the name of its lua/ file without ".lua" (enter,
// status, tick, …), or "" for a script that is not flashgate's. The set of
// names is fixed (one per file), so it bounds a metric label.
func ScriptName(sha string) string { return scriptNames[strings.ToLower(sha)] }

// exporterScript takes or renews a room's metrics-exporter lease (lua/exporter.lua).
var exporterScript = redis.NewScript(mustRead("lua/exporter.lua"))

// ClaimExporter takes or renews, for replica (an id unique to the calling
// process), the lease of exporting room's figures to Prometheus: true when
// replica holds it now (it was free, expired, or already replica's; renewed
// for lease), false while another replica's lease runs. One key,
// fg:{room}:exporter (the room's hash slot), expiring by itself. The
// server's /metrics exports room-wide series (read from Redis, the same on
// every replica) only for the rooms whose lease it holds, so that sum()
// across replicas counts each room once (docs/operations.md "Observability").
// Errors: flashgate.ErrInvalidInput (room id), flashgate.ErrUnavailable.
func (is *Issuer) ClaimExporter(ctx context.Context, room, replica string, lease time.Duration) (bool, error) {
	if err := checkRoom(room); err != nil {
		return false, err
	}
	if lease < time.Millisecond {
		return false, flashgate.Errorf(flashgate.CodeInvalidInput, "exporter lease must be at least 1ms, got %s", lease)
	}
	n, err := exporterScript.Run(ctx, is.cfg.Redis, []string{roomkey.Exporter(room)}, replica, lease.Milliseconds()).Int()
	if err != nil {
		return false, unavailable(err)
	}
	return n == 1, nil
}

// TickObserver is told of every tick Run performs: the room, how long the
// step took (all its script calls), its result and its error (nil, or what
// Tick returned; a room found gone, flashgate.ErrUnknownRoom, included).
// It runs on Run's goroutine: it must be quick and must not block.
type TickObserver func(room string, took time.Duration, res TickResult, err error)

// ObserveTicks makes f the TickObserver of Run (nil: none). Safe to call
// while Run runs; the server's metrics set it (tick duration and failures).
func (is *Issuer) ObserveTicks(f TickObserver) {
	if f == nil {
		is.tickObs.Store(nil)
		return
	}
	is.tickObs.Store(&f)
}

// observeTick reports one tick to the TickObserver, if any.
func (is *Issuer) observeTick(room string, took time.Duration, res TickResult, err error) {
	if f := is.tickObs.Load(); f != nil {
		(*f)(room, took, res, err)
	}
}
