package issuer

import (
	"context"
	"embed"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFS embed.FS

func loadScript(name string) *redis.Script {
	prelude, err := luaFS.ReadFile("lua/prelude.lua")
	if err != nil {
		panic(err)
	}
	body, err := luaFS.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(err)
	}
	return redis.NewScript(string(prelude) + "\n" + string(body))
}

// The scripts, one per operation (Lua in lua/*.lua). go-redis runs them with
// EVALSHA and falls back to EVAL on NOSCRIPT, so a SCRIPT FLUSH or a Redis
// restart only costs one extra round trip.
var (
	enterScript    = loadScript("enter")
	statusScript   = loadScript("status")
	leaveScript    = loadScript("leave")
	completeScript = loadScript("complete")
	activeScript   = loadScript("active")
	revokeScript   = loadScript("revoke")
	tickScript     = loadScript("tick")
	statsScript    = loadScript("stats")
	snapshotScript = loadScript("snapshot")
)

// Redis lists just the commands flashgate uses, so *redis.Client,
// *redis.ClusterClient, *redis.Ring and the Sentinel-backed failover client
// all satisfy it (go-redis/redis_rate style).
type Redis interface {
	redis.Scripter
	Ping(ctx context.Context) *redis.StatusCmd
	HSet(ctx context.Context, key string, values ...any) *redis.IntCmd
	HGetAll(ctx context.Context, key string) *redis.MapStringStringCmd
	SAdd(ctx context.Context, key string, members ...any) *redis.IntCmd
	SMembers(ctx context.Context, key string) *redis.StringSliceCmd
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
	Get(ctx context.Context, key string) *redis.StringCmd
	ZScore(ctx context.Context, key, member string) *redis.FloatCmd
}

// Key names. Every key of a room carries the hash tag {room}, so each script
// touches one Cluster slot (DESIGN.md "Redis data model").
const (
	keyRooms  = "fg:rooms"          // SET of room ids, read by the tick loop and the admin API
	keySecret = "fg:waiting-secret" // shared HMAC key for waiting tokens (when not configured)
	keyReady  = "fg:ready"          // written by Ping (readiness: does Redis take writes?), expires
)

// RoomKeys returns the ten keys of a room in the order the scripts expect
// (see lua/prelude.lua).
func RoomKeys(room string) []string {
	p := "fg:{" + room + "}:"
	return []string{p + "config", p + "waiting", p + "active", p + "users", p + "seq",
		p + "admno", p + "admits", p + "bucket", p + "stats", p + "ended"}
}

// activeKey is the key of a room's active ZSET (RoomKeys(room)[2]).
func activeKey(room string) string { return "fg:{" + room + "}:active" }
