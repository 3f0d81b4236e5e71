// Package ctxtime holds the one context-aware sleep the journal consumer,
// the flash-sale simulator and the storm tests share.
package ctxtime

import (
	"context"
	"time"
)

// Sleep waits d or until ctx is done, and reports whether d passed (false:
// ctx ended first). A d ≤ 0 does not wait: it reports whether ctx is still
// live.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
