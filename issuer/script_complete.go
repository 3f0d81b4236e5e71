package issuer

import (
	"time"

	"github.com/flashgate/flashgate"
)

// completeScript is lua/complete.lua (with the prelude definitions it uses). KEYS: the room keys it
// uses, completeKeys (assembleKeys: indices into roomKeys), then the minted key (mintedKey) of each
// admission. ARGV[1] = now, ARGV[2] = ""; per admission three more: user, jti, minted digest (""
// when the signature was verified).
var completeScript, completeKeys = loadScriptKeys("complete")

// completeReply is one admission's reply of the complete script
// (lua/complete.lua): {'COMPLETED', at_ms, repeated}.
type completeReply struct {
	at       time.Time // when the admission was completed (the first time)
	repeated bool
}

// decodeComplete decodes the complete script's reply for n (user, jti)
// pairs (lua/complete.lua): one reply per pair, in order, {'COMPLETED',
// at_ms, repeated} or {'ERROR', code} (that pair's error alone: scriptError
// for room). A reply of any other shape is a flashgate.CodeInternal error.
func decodeComplete(r []any, n int, room string) ([]outcome[completeReply], error) {
	if len(r) != n {
		return nil, flashgate.Errorf(flashgate.CodeInternal, "complete script: malformed reply for %d admissions: %v", n, r)
	}
	out := make([]outcome[completeReply], n)
	for i, x := range r {
		v, _ := x.([]any)
		switch {
		case len(v) == 3 && v[0] == "COMPLETED":
			out[i].res = completeReply{at: time.UnixMilli(asInt(v[1])), repeated: asInt(v[2]) == 1}
		case len(v) == 2 && v[0] == "ERROR":
			out[i].err = scriptError(asString(v[1]), room)
		default:
			return nil, flashgate.Errorf(flashgate.CodeInternal, "complete script: malformed reply for admission %d: %v", i+1, x)
		}
	}
	return out, nil
}
