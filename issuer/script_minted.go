package issuer

import (
	"github.com/flashgate/flashgate/issuer/store"
)

// mintedScript is lua/minted.lua. Not a room's script (no prelude): KEYS[i] = the minted key
// (mintedKey) of the i-th token; ARGV[2i-1] = its digest, ARGV[2i] = its time to live (ms). Reply: the
// number of keys written.
var mintedScript = store.LoadPlain("minted")
