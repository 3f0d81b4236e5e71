// Package roomkey is the one definition of flashgate's Redis key names
// (docs/operations.md#redis-data-model): a waiting room's keys and the global
// ones (fg:rooms, fg:autorooms, …), shared by the issuer (whose scripts take
// them as KEYS), the journal consumer (which reads the journal stream and
// fg:rooms) and the simulator (which reads the room's epoch). Every key of a room carries the
// hash tag {room}, so a script touches one Cluster slot.
package roomkey

// The names of a room's keys (fg:{room}:<name>), in the order the room
// scripts take them as KEYS (issuer/lua/prelude.lua: KEYS[1] is Config).
const (
	Config    = "config"    // HASH the room's config (and its packed copy, field "packed")
	Waiting   = "waiting"   // ZSET the public line: user -> arrival seq (or lottery score)
	Active    = "active"    // ZSET admissions: jti -> expiry (ms)
	Users     = "users"     // HASH user -> jti of the user's current admission
	Seq       = "seq"       // STRING the arrival counter
	AdmNo     = "admno"     // STRING the admission counter
	Admits    = "admits"    // ZSET the 60 s admission log
	Bucket    = "bucket"    // HASH the token bucket
	Stats     = "stats"     // HASH counters
	Ended     = "ended"     // ZSET ended records
	Bans      = "bans"      // ZSET user -> end of ban (ms)
	BanWhy    = "banwhy"    // HASH user -> "<banned_ms>:<reason>"
	Unclaimed = "unclaimed" // ZSET jti -> claim deadline (ms)
	Priority  = "priority"  // ZSET the priority lane: user -> arrival seq
	Invites   = "invites"   // ZSET used invites: jti -> expiry (ms)
	LaneSeqs  = "laneseqs"  // ZSET seqs of entries created through a lane
	Journal   = "journal"   // STREAM the room's journal
)

// names is the scripts' KEYS order.
var names = [...]string{Config, Waiting, Active, Users, Seq, AdmNo, Admits, Bucket, Stats, Ended, Bans, BanWhy,
	Unclaimed, Priority, Invites, LaneSeqs, Journal}

// Key returns the key name of room's key name (one of the constants above):
// "fg:{room}:name".
func Key(room, name string) string { return "fg:{" + room + "}:" + name }

// All returns the keys of room in the order the room scripts take them.
func All(room string) []string {
	p := "fg:{" + room + "}:"
	keys := make([]string, len(names))
	for i, n := range names {
		keys[i] = p + n
	}
	return keys
}

// Some returns the keys of room at positions idx of All (from 0), in
// that order: the KEYS of a script that takes only the keys it uses.
func Some(room string, idx []int) []string {
	p := "fg:{" + room + "}:"
	keys := make([]string, len(idx))
	for i, k := range idx {
		keys[i] = p + names[k]
	}
	return keys
}

// Minted is the key holding the digest of the admission token minted for
// admission jti of room (issuer/lua/minted.lua, read by complete.lua).
func Minted(room, jti string) string { return "fg:{" + room + "}:minted:" + jti }

// Exporter is room's metrics-exporter lease (issuer/lua/exporter.lua).
func Exporter(room string) string { return Key(room, "exporter") }

// The global keys (no hash tag: each lives in its own Cluster slot, so no
// room script takes them).
const (
	Rooms         = "fg:rooms"          // SET of room ids, read by the tick loop, the admin API and the journal consumer
	AutoRooms     = "fg:autorooms"      // ZSET auto room -> when its slot was reserved (ms): Config.MaxAutoRooms
	WaitingSecret = "fg:waiting-secret" // the shared HMAC key of waiting tokens (when not configured)
	Ready         = "fg:ready"          // written by the readiness check (does Redis take writes?), expires
	Directives    = "fg:directives"     // HASH room -> not_before (Unix s): the edge directive document (Stop)
)
