package store

import (
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/flashgate/flashgate/internal/roomkey"
	"github.com/flashgate/flashgate/issuer/lua"
)

// prelude is lua/prelude.lua cut into its definitions (splitPrelude).
var prelude = splitPrelude(mustRead("lua/prelude.lua"))

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
