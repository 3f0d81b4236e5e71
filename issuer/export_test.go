package issuer

// RoomKeys exposes roomKeys to the external tests (package issuer_test):
// the keys of a room in the order the scripts expect.
var RoomKeys = roomKeys

// DrainHash is the SHA1 of the drain script (for counting its calls).
var DrainHash = drainScript.Hash()

// EnterHash is the SHA1 of the enter script.
var EnterHash = enterScript.Hash()

// EnterScript is the enter script (prelude included), to run batches directly.
var EnterScript = enterScript

// RestorePartly is Restore stopping after stopAfter script calls (an
// interrupted restore).
var RestorePartly = restore
