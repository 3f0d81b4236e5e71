// Package logtest records log records for tests that count log lines (the
// "one line per state change, not per request" rule of docs/operations.md#failure-modes).
package logtest

import (
	"context"
	"log/slog"
	"strings"
	"sync"
)

// Recorder is a slog.Handler that keeps every record's level and message
// (attributes are dropped). It is safe for concurrent use.
type Recorder struct {
	mu    sync.Mutex
	lines []string
}

// New returns a Recorder and a logger writing to it.
func New() (*Recorder, *slog.Logger) {
	r := &Recorder{}
	return r, slog.New(r)
}

func (r *Recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *Recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *Recorder) WithGroup(string) slog.Handler            { return r }

// Handle records rec as "LEVEL message".
func (r *Recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, rec.Level.String()+" "+rec.Message)
	return nil
}

// Lines returns the records so far, as "LEVEL message", in order.
func (r *Recorder) Lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...)
}

// Count returns how many records so far have a message starting with prefix.
func (r *Recorder) Count(prefix string) int {
	n := 0
	for _, l := range r.Lines() {
		if _, msg, _ := strings.Cut(l, " "); strings.HasPrefix(msg, prefix) {
			n++
		}
	}
	return n
}
