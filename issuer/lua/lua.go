// Package lua holds flashgate's Redis scripts, every one of them: the room
// scripts (enter.lua, status.lua, tick.lua, …), the prelude they share
// (prelude.lua, cut into definitions by issuer/store), and the small
// scripts that take no prelude (autoroom, minted, exporter, stop,
// branding). issuer/store loads them; no Go file holds Lua.
package lua

import "embed"

//go:embed *.lua
var fs embed.FS

// Source returns the text of name (e.g. "enter.lua"); it panics when there
// is no such file (the set is fixed at build time).
func Source(name string) string {
	b, err := fs.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return string(b)
}
