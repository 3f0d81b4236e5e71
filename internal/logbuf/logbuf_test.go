package logbuf

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// sink records each Write call separately, so a test can see how records
// were grouped into writes.
type sink struct {
	mu     sync.Mutex
	writes []string
	fail   bool
}

func (s *sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return 0, errors.New("disk full")
	}
	s.writes = append(s.writes, string(p))
	return len(p), nil
}

func (s *sink) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.writes...)
}

func TestRecordsShareOneWriteUntilFlush(t *testing.T) {
	out := &sink{}
	w := New(out, 0, time.Hour) // only explicit flushes in this test
	defer w.Close()
	for _, l := range []string{"a\n", "b\n", "c\n"} {
		n, err := w.Write([]byte(l))
		require.NoError(t, err)
		require.Equal(t, len(l), n)
	}
	require.Empty(t, out.all(), "nothing is written before a flush")
	require.NoError(t, w.Flush())
	require.Equal(t, []string{"a\nb\nc\n"}, out.all(), "three records, one write")
}

func TestPeriodicFlush(t *testing.T) {
	out := &sink{}
	w := New(out, 0, 5*time.Millisecond)
	defer w.Close()
	_, _ = w.Write([]byte("x\n"))
	require.Eventually(t, func() bool { return len(out.all()) == 1 }, 5*time.Second, time.Millisecond)
	require.Equal(t, "x\n", out.all()[0])
}

func TestFullBufferKeepsRecordsWhole(t *testing.T) {
	out := &sink{}
	w := New(out, 8, time.Hour)
	defer w.Close()
	_, _ = w.Write([]byte("12345\n")) // 6 of 8 bytes
	_, _ = w.Write([]byte("abcde\n")) // does not fit: the first record is written alone first
	_, _ = w.Write([]byte("a record longer than the buffer\n"))
	require.NoError(t, w.Flush())
	got := out.all()
	require.Equal(t, "12345\n", got[0])
	require.Equal(t, "12345\nabcde\na record longer than the buffer\n", strings.Join(got, ""))
	for _, g := range got {
		require.True(t, strings.HasSuffix(g, "\n"), "a write ends with a whole record: %q", g)
	}
}

func TestCloseFlushesAndStops(t *testing.T) {
	out := &sink{}
	w := New(out, 0, time.Hour)
	_, _ = w.Write([]byte("last\n"))
	require.NoError(t, w.Close())
	require.Equal(t, []string{"last\n"}, out.all())
	require.NoError(t, w.Close(), "a second Close is harmless")
}

func TestWriteErrorIsReportedNotWedged(t *testing.T) {
	out := &sink{fail: true}
	w := New(out, 0, time.Hour)
	defer w.Close()
	_, err := w.Write([]byte("lost\n"))
	require.NoError(t, err, "a log write never fails its caller")
	require.ErrorContains(t, w.Flush(), "disk full")
	out.mu.Lock()
	out.fail = false
	out.mu.Unlock()
	_, _ = w.Write([]byte("later\n"))
	require.ErrorContains(t, w.Flush(), "disk full", "the first error stays reported")
	require.Equal(t, []string{"later\n"}, out.all(), "lines after a failure are written again")
}

func TestFlushOnWarn(t *testing.T) {
	out := &sink{}
	w := New(out, 0, time.Hour)
	defer w.Close()
	log := slog.New(FlushOn(slog.NewTextHandler(w, nil), slog.LevelWarn, w.Flush)).With("svc", "x")
	log.Info("request")
	require.Empty(t, out.all(), "INFO waits for the next flush")
	log.WithGroup("g").Warn("trouble", "k", 1)
	got := strings.Join(out.all(), "")
	require.Contains(t, got, "msg=request")
	require.Contains(t, got, "msg=trouble svc=x g.k=1", "attrs and groups pass through")
	require.Len(t, out.all(), 1, "the warning flushed both in one write")
}

func TestConcurrentWritersKeepRecordsWhole(t *testing.T) {
	var out bytes.Buffer
	var mu sync.Mutex
	w := New(writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(p) }), 256, time.Millisecond)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				_, _ = w.Write([]byte("0123456789abcdef\n"))
			}
		}()
	}
	wg.Wait()
	require.NoError(t, w.Close())
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 1600)
	for _, l := range lines {
		require.Equal(t, "0123456789abcdef", l)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
