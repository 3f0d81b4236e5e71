package issuer

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestConfigScriptBatchAlias: ScriptBatch bounds every coalesced batch;
// the deprecated EnterBatch is read only when ScriptBatch is 0.
func TestConfigScriptBatchAlias(t *testing.T) {
	for name, c := range map[string]struct {
		cfg  Config
		want int
	}{
		"neither":           {Config{}, DefaultScriptBatch},
		"script batch":      {Config{ScriptBatch: 4}, 4},
		"enter batch (old)": {Config{EnterBatch: 3}, 3},
		"both: script wins": {Config{ScriptBatch: 4, EnterBatch: 3}, 4},
		"no coalescing":     {Config{EnterBatch: 1}, 1},
	} {
		assert.Equal(t, c.want, c.cfg.withDefaults().ScriptBatch, name)
	}
}

// TestConfigOffValues: NoAutoRoomLimit, AutoRoomNeverIdle and NoJournal
// turn their settings off; 0 is the default.
func TestConfigOffValues(t *testing.T) {
	off := &Ticker{&core{cfg: Config{MaxAutoRooms: NoAutoRoomLimit, AutoRoomIdle: AutoRoomNeverIdle, JournalMaxLen: NoJournal}.withDefaults(), policy: "x"}}
	assert.False(t, off.autoLimited())
	assert.Zero(t, off.autoIdleMs())
	assert.Zero(t, off.journalMaxLen())
	def := &Ticker{&core{cfg: Config{}.withDefaults(), policy: "x"}}
	assert.True(t, def.autoLimited())
	assert.Equal(t, DefaultAutoRoomIdle.Milliseconds(), def.autoIdleMs())
	assert.Equal(t, int64(DefaultJournalMaxLen), def.journalMaxLen())
}
