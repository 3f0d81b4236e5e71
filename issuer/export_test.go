package issuer

import "github.com/flashgate/flashgate/issuer/store"

// RoomKeys exposes roomKeys to the external tests (package issuer_test):
// the keys of a room in the order the scripts expect.
var RoomKeys = roomKeys

// DrainHash is the SHA1 of the drain script (for counting its calls).
var DrainHash = store.Hash("drain")

// EnterHash is the SHA1 of the enter script.
var EnterHash = store.Hash("enter")

// EnterScript is the enter script (prelude included), to run batches directly.
var EnterScript = store.EnterScript()

// RestorePartly is Restore stopping after stopAfter script calls (an
// interrupted restore).
var RestorePartly = restore

// AuditHash is the SHA1 of the audit script (ScriptName does not name it).
var AuditHash = store.Hash("audit")

// Queued returns how many callers wait in room's coalescer of kind
// ("enter", "status": status and exchange, "complete": both completes),
// behind the call in flight: a test queues a batch in a known order.
func (is *Issuer) Queued(room, kind string) int {
	b := is.roomBatch(room)
	switch kind {
	case "enter":
		return queueLen(b.enter)
	case "status":
		return queueLen(b.status)
	case "complete":
		return queueLen(b.complete)
	}
	panic("Queued: unknown kind " + kind)
}

func queueLen[T, R any](c *coalescer[T, R]) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

// MintedKey is mintedKey: the key of the minted note of admission jti.
var MintedKey = mintedKey

// roomBatchers are one room's coalescers of every path, for tests.
type roomBatchers struct {
	room     string
	enter    *coalescer[string, *scriptEntry]
	status   *coalescer[statusItem, scriptEntry]
	complete *coalescer[completeItem, completeReply]
}

// roomBatch returns room's coalescers (making those not made yet).
func (is *Issuer) roomBatch(room string) roomBatchers {
	e := is.enterBatch(room)
	return roomBatchers{room: e.room, enter: e, status: is.statusBatch(room), complete: is.completeBatch(room)}
}
