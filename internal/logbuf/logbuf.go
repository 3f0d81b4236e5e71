// Package logbuf buffers a process's log output: log records are
// appended to an in-memory buffer and written to the underlying writer in
// one write every flush interval, when the buffer fills, after every record
// at or above a level (FlushOn; flashgate serve uses WARN, so problems are
// never held back), and at Close. Under load the access log of `flashgate
// serve` (on by default) made a write syscall per request, 1–3 % of the
// issuer's CPU (docs/performance.md#measurements); buffered, the lines of one interval
// share one write.
//
// What a crash can lose: the records of at most one interval (INFO and
// below). A record is never split: each Write call (slog writes one record
// per call) lands whole, in order.
package logbuf

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// DefaultSize is the buffer size of New when size is 0 (64 KiB: a few
// hundred access log lines).
const DefaultSize = 64 << 10

// Writer is a buffered, concurrency-safe io.Writer flushed periodically.
type Writer struct {
	mu   sync.Mutex
	out  io.Writer
	buf  *bufio.Writer
	err  error // first write error of the underlying writer (kept, returned by Flush)
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// New returns a Writer over w with a buffer of size bytes (0: DefaultSize)
// that flushes every interval (must be > 0) until Close.
func New(w io.Writer, size int, every time.Duration) *Writer {
	if size <= 0 {
		size = DefaultSize
	}
	b := &Writer{out: w, buf: bufio.NewWriterSize(w, size), stop: make(chan struct{}), done: make(chan struct{})}
	go b.loop(every)
	return b
}

func (b *Writer) loop(every time.Duration) {
	defer close(b.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			_ = b.Flush()
		case <-b.stop:
			return
		}
	}
}

// Write appends p (one log record) to the buffer; a record larger than
// the free space first flushes what is buffered. It never returns an error
// of the underlying writer (a log line is not worth failing a request);
// Flush and Close report the first one.
func (b *Writer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(p) > b.buf.Available() && b.buf.Buffered() > 0 {
		b.flushLocked()
	}
	if _, err := b.buf.Write(p); err != nil && b.err == nil {
		b.err = err
	}
	return len(p), nil
}

func (b *Writer) flushLocked() {
	if err := b.buf.Flush(); err != nil {
		if b.err == nil {
			b.err = err
		}
		// bufio's error is sticky: drop what could not be written and go on,
		// rather than lose every later line too.
		b.buf.Reset(b.out)
	}
}

// Flush writes what is buffered now. It returns the first error the
// underlying writer gave since New.
func (b *Writer) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Buffered() > 0 {
		b.flushLocked()
	}
	return b.err
}

// Close stops the periodic flush and flushes. Writes after Close still
// land in the buffer and are written by a later Flush only.
func (b *Writer) Close() error {
	b.once.Do(func() { close(b.stop) })
	<-b.done
	return b.Flush()
}

// FlushOn returns h wrapped so that every record at or above level is
// followed by flush (e.g. Writer.Flush): warnings and errors reach the
// output at once, INFO and below at the next periodic flush.
func FlushOn(h slog.Handler, level slog.Level, flush func() error) slog.Handler {
	return &flushOn{h: h, level: level, flush: flush}
}

type flushOn struct {
	h     slog.Handler
	level slog.Level
	flush func() error
}

func (f *flushOn) Enabled(ctx context.Context, l slog.Level) bool { return f.h.Enabled(ctx, l) }

func (f *flushOn) Handle(ctx context.Context, r slog.Record) error {
	err := f.h.Handle(ctx, r)
	if r.Level >= f.level {
		_ = f.flush()
	}
	return err
}

func (f *flushOn) WithAttrs(as []slog.Attr) slog.Handler {
	return &flushOn{h: f.h.WithAttrs(as), level: f.level, flush: f.flush}
}

func (f *flushOn) WithGroup(name string) slog.Handler {
	return &flushOn{h: f.h.WithGroup(name), level: f.level, flush: f.flush}
}
