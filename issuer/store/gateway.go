package store

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate"
)

// Gateway is flashgate's one door to its Redis scripts: one method per
// script (the file of the same name: enter.go is lua/enter.lua's call),
// each taking typed arguments, building the script's keys by name (keys.go)
// and decoding its reply into a typed struct with the one checked reader
// (reader.go). go-redis runs the scripts with EVALSHA and falls back to
// EVAL on NOSCRIPT, so a SCRIPT FLUSH or a Redis restart only costs one
// extra round trip. Errors: a script's {'ERROR', code} is ScriptError's
// domain error (passed through Options.Lost), a Redis failure
// Unavailable's, a reply of another shape a flashgate.CodeInternal error
// naming the script and the field.
type Gateway struct {
	rdb            redis.Scripter
	now            func() time.Time
	replicas       int
	replicaTimeout time.Duration
	lost           func(err error, room string) error
}

// Options configure a Gateway.
type Options struct {
	// Now is the clock the scripts read (ARGV[1], ms); nil: Redis TIME.
	Now func() time.Time
	// Replicas is how many Redis replicas a replicated call (complete,
	// revoke, ban) waits for (WAIT), within ReplicaTimeout; 0: none. It
	// needs a client with Pipeline.
	Replicas       int
	ReplicaTimeout time.Duration
	// Lost maps a room script's error for room (the issuer's lost-room
	// rule); nil: errors as they are.
	Lost func(err error, room string) error
}

// New returns a Gateway over rdb.
func New(rdb redis.Scripter, o Options) *Gateway {
	return &Gateway{rdb: rdb, now: o.Now, replicas: o.Replicas, replicaTimeout: o.ReplicaTimeout, lost: o.Lost}
}

// pipeliner is the optional capability Options.Replicas needs.
type pipeliner interface {
	Pipeline() redis.Pipeliner
}

func (g *Gateway) nowArg() string {
	if g.now == nil {
		return ""
	}
	return strconv.FormatInt(g.now().UnixMilli(), 10)
}

func (g *Gateway) mapLost(err error, room string) error {
	if err == nil || g.lost == nil {
		return err
	}
	return g.lost(err, room)
}

// run runs room script s with keys and ARGV = now, policy, args, and maps
// its reply (reply) and error (Options.Lost).
func (g *Gateway) run(ctx context.Context, s *redis.Script, room string, keys []string, policy string, args ...any) ([]any, error) {
	argv := append([]any{g.nowArg(), policy}, args...)
	res, err := s.Run(ctx, g.rdb, keys, argv...).Slice()
	res, err = reply(res, err, room)
	return res, g.mapLost(err, room)
}

// runReplicated is run (no create policy) followed, on the same
// connection, by WAIT for Options.Replicas replicas (when set).
func (g *Gateway) runReplicated(ctx context.Context, s *redis.Script, room string, keys []string, args ...any) ([]any, error) {
	n := g.replicas
	if n <= 0 {
		return g.run(ctx, s, room, keys, "", args...)
	}
	argv := append([]any{g.nowArg(), ""}, args...)
	// exec pipelines the script (EVALSHA, or EVAL after NOSCRIPT) and WAIT,
	// since WAIT only counts the writes of its own connection.
	exec := func(eval func(redis.Scripter) *redis.Cmd) ([]any, int64, error) {
		p := g.rdb.(pipeliner).Pipeline()
		c := eval(p)
		w := p.Do(ctx, "WAIT", n, g.replicaTimeout.Milliseconds())
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
		return nil, g.mapLost(err, room)
	}
	if acks < int64(n) {
		return nil, &flashgate.Error{Code: flashgate.CodeUnavailable, Message: fmt.Sprintf(
			"write acknowledged by %d of %d replicas within %s; retry (a retry returns the first result)",
			acks, n, g.replicaTimeout)}
	}
	return res, nil
}

// runInt runs a script without the prelude whose reply is one integer
// (field), read by the reader: a reply of another type is an error naming
// the script and the field.
func (g *Gateway) runInt(ctx context.Context, s *redis.Script, script, field string, keys []string, args ...any) (int64, error) {
	v, err := s.Run(ctx, g.rdb, keys, args...).Result()
	if err != nil {
		return 0, Unavailable(err)
	}
	return decodeInt(script, field, v)
}

func decodeInt(script, field string, v any) (int64, error) {
	c := newReader(script, []any{v})
	n := c.int(field)
	return n, c.Err()
}

// reply maps a script's reply: Redis failures to Unavailable,
// {'ERROR', code} to the code's domain error (ScriptError).
func reply(res []any, err error, room string) ([]any, error) {
	if err != nil {
		return nil, Unavailable(err)
	}
	if len(res) == 2 && res[0] == "ERROR" {
		code, _ := res[1].(string)
		return nil, ScriptError(code, room)
	}
	return res, nil
}

// The scripts, by name (the lua/ file without ".lua").
var (
	activeScript    = load("active")
	auditScript     = load("audit")
	autoRoomScript  = loadPlain("autoroom")
	banScript       = load("ban")
	bansScript      = load("bans")
	brandingScript  = loadPlain("branding")
	configureScript = load("configure")
	drainScript     = load("drain")
	enterScript     = load("enter")
	exporterScript  = loadPlain("exporter")
	inviteScript    = load("invite")
	leaveScript     = load("leave")
	lotteryScript   = loadPlain("lottery")
	mintedScript    = loadPlain("minted")
	restoreScript   = load("restore")
	revokeScript    = load("revoke")
	snapshotScript  = load("snapshot")
	statsScript     = load("stats")
	stopScript      = loadPlain("stop")
	tickScript      = load("tick")
	unbanScript     = load("unban")

	completeScript, completeKeys = loadKeys("complete")
	statusScript, statusKeys     = loadKeys("status")
)

// scripts names the scripts ScriptName answers (audit, branding and stop
// are left out, as before the gateway: their calls are rare).
var scripts = map[string]*redis.Script{
	"enter": enterScript, "status": statusScript, "leave": leaveScript, "complete": completeScript,
	"active": activeScript, "revoke": revokeScript, "tick": tickScript, "stats": statsScript,
	"snapshot": snapshotScript, "ban": banScript, "unban": unbanScript, "bans": bansScript,
	"configure": configureScript, "drain": drainScript, "autoroom": autoRoomScript,
	"invite": inviteScript, "exporter": exporterScript, "restore": restoreScript, "minted": mintedScript,
	"lottery": lotteryScript, "roombeacon": roomBeaconScript,
}

var scriptNames = func() map[string]string {
	m := make(map[string]string, len(scripts))
	for name, s := range scripts {
		m[s.Hash()] = name
	}
	return m
}()

// ScriptName names the flashgate script whose SHA-1 (lowercase hex, as
// EVALSHA sends it) is sha: the name of its lua/ file without ".lua"
// (enter, status, tick, …), or "" for a script that is not flashgate's.
func ScriptName(sha string) string { return scriptNames[strings.ToLower(sha)] }

// ScriptNames returns the names ScriptName answers, sorted.
func ScriptNames() []string {
	out := make([]string, 0, len(scripts))
	for n := range scripts {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Hash returns the SHA-1 of the script name (as ScriptName names it, or
// "audit"), "" for an unknown name: for tests that count a script's calls.
func Hash(name string) string {
	if name == "audit" {
		return auditScript.Hash()
	}
	if s, ok := scripts[name]; ok {
		return s.Hash()
	}
	return ""
}

// EnterScript is the enter script as it runs (prelude included), for
// benchmarks that run batches directly.
func EnterScript() *redis.Script { return enterScript }
