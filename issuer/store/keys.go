package store

import (
	"github.com/flashgate/flashgate/internal/roomkey"
)

// The scripts' keys, one struct per shape of KEYS, each field a key by
// name (the names: internal/roomkey). A room script binds the room's keys
// as K_CONFIG, K_WAITING, … (lua/prelude.lua's header lists them); the
// struct's keys method lays them out as the script takes them.

// roomKeysOf are the KEYS of a room script that takes every room key
// (Load): the room's keys in lua/prelude.lua's order.
type roomKeysOf struct{ room string }

func (k roomKeysOf) keys() []string { return roomkey.All(k.room) }

// statusKeysOf are status.lua's KEYS: only the room keys it binds
// (LoadKeys found them), in the room's order.
type statusKeysOf struct{ room string }

func (k statusKeysOf) keys() []string { return roomkey.Some(k.room, statusKeys) }

// completeKeysOf are complete.lua's KEYS: the room keys it binds, then
// the minted note of each admission (KEYS[ROOM_KEYS + i]).
type completeKeysOf struct {
	room   string
	minted []string // roomkey.Minted of each admission, in order
}

func (k completeKeysOf) keys() []string {
	out := make([]string, 0, len(completeKeys)+len(k.minted))
	return append(append(out, roomkey.Some(k.room, completeKeys)...), k.minted...)
}

// configKeyOf is the KEYS of a script that takes the room's config hash
// alone (stop.lua, branding.lua).
type configKeyOf struct{ config string }

func (k configKeyOf) keys() []string { return []string{k.config} }
