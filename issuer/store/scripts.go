package store

import (
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/roomkey"
	"github.com/flashgate/flashgate/issuer/lua"
)

// preludeFiles are the prelude's files by concern, in order: their
// concatenation is the prelude, cut into its definitions once at start-up
// (splitPrelude), so a definition may use any defined in an earlier file.
var preludeFiles = []string{
	"prelude.lua",                // the KEYS layout, ARGV, the room's clock (now_ms)
	"prelude_epoch.lua",          // epochs, lottery scores, the pre-queue
	"prelude_journal.lua",        // the journal stream's entries
	"prelude_config.lua",         // the room's config: read, packed, created, the clock kept, the lottery drawn
	"prelude_entries.lua",        // arrival seqs of admission ids, ended records, the live count
	"prelude_admission_rate.lua", // the admission rate (rate_budget, rate_consume) and admit
	"prelude_eta.lua",            // the wait estimate's figures
	"prelude_bans.lua",           // bans
	"prelude_end.lua",            // the end of a room: close reasons, retention
}

// preludeSource is the whole prelude: preludeFiles, concatenated.
func preludeSource() string {
	var b strings.Builder
	for _, f := range preludeFiles {
		b.WriteString(mustRead(f))
	}
	return b.String()
}

// prelude is the prelude cut into its definitions (splitPrelude).
var prelude = splitPrelude(preludeSource())

// mustRead returns the text of lua/<name> (name with or without "lua/").
func mustRead(name string) string { return lua.Source(strings.TrimPrefix(name, "lua/")) }

// roomKeys returns the keys of a room in the order the scripts expect
// (lua/prelude.lua's layout): roomkey.All.
func roomKeys(room string) []string { return roomkey.All(room) }

// load returns the room script lua/<name>.lua preceded by the prelude
// definitions it uses (assemble).
func load(name string) *redis.Script {
	return redis.NewScript(assemble(prelude, mustRead("lua/"+name+".lua")))
}

// loadKeys is load for a script that takes only the room keys it uses
// (assembleKeys): it returns them too, as indices into the room's keys.
func loadKeys(name string) (*redis.Script, []int) {
	src, keys := assembleKeys(prelude, mustRead("lua/"+name+".lua"))
	return redis.NewScript(src), keys
}

// loadPlain returns lua/<name>.lua as it is (a script without the prelude).
func loadPlain(name string) *redis.Script { return redis.NewScript(mustRead("lua/" + name + ".lua")) }
