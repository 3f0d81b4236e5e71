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
