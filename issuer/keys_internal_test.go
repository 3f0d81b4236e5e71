package issuer

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRoomKeyNames pins the key layout that tests of other packages spell
// out ("fg:{room}:<name>", lua/prelude.lua's KEYS order).
func TestRoomKeyNames(t *testing.T) {
	names := []string{"config", "waiting", "active", "users", "seq", "admno", "admits", "bucket", "stats", "ended", "bans", "banwhy",
		"unclaimed", "priority", "invites", "laneseqs", "journal"}
	keys := roomKeys("r")
	assert.Len(t, keys, len(names))
	for i, n := range names {
		assert.Equal(t, "fg:{r}:"+n, keys[i])
	}
	assert.Equal(t, keys[2], activeKey("r"))
}
