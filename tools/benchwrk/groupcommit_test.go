package main

import (
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// blockFirst wraps send so that its first call blocks until release is
// closed (entered is closed when that call has begun), and records every
// call's items.
type blockFirst struct {
	entered, release chan struct{}
	mu               sync.Mutex
	batches          [][]string
	first            sync.Once
}

func newBlockFirst() *blockFirst {
	return &blockFirst{entered: make(chan struct{}), release: make(chan struct{})}
}

func (b *blockFirst) wrap(send func([]string) error) func([]string) error {
	return func(items []string) error {
		b.mu.Lock()
		b.batches = append(b.batches, items)
		b.mu.Unlock()
		blocked := false
		b.first.Do(func() { blocked = true })
		if blocked {
			close(b.entered)
			<-b.release
		}
		return send(items)
	}
}

// waitQueued returns once n callers wait in g (a synchronisation, not a
// timing: it spins until they have queued).
func waitQueued(g *groupCommit, n int) {
	for g.queued() < n {
		runtime.Gosched()
	}
}

// TestGroupCommitCoalesces: while a batch is in flight, callers queue and go
// together in the next one, in arrival order, at most maxBatch at a time;
// every caller gets its batch's error.
func TestGroupCommitCoalesces(t *testing.T) {
	bf := newBlockFirst()
	boom := errors.New("boom")
	g := &groupCommit{}
	g.send = bf.wrap(func(items []string) error {
		if len(items) == maxBatch {
			return boom
		}
		return nil
	})
	errs := make([]error, maxBatch+2)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); errs[0] = g.do("first") }()
	<-bf.entered
	for i := 1; i < len(errs); i++ {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = g.do("u") }()
		if i == 1 {
			waitQueued(g, 1) // "u" arrived first: it leads the next batch
		}
	}
	waitQueued(g, maxBatch+1)
	close(bf.release)
	wg.Wait()

	require.Len(t, bf.batches, 3)
	assert.Equal(t, []string{"first"}, bf.batches[0])
	assert.Len(t, bf.batches[1], maxBatch, "capped at maxBatch")
	assert.Len(t, bf.batches[2], 1, "the rest in the next batch")
	assert.EqualValues(t, 3, g.calls.Load())
	assert.EqualValues(t, maxBatch+2, g.items.Load())
	assert.Equal(t, 0, g.queued())
	var failed int
	for _, err := range errs {
		if err != nil {
			assert.ErrorIs(t, err, boom)
			failed++
		}
	}
	assert.Equal(t, maxBatch, failed, "the failed batch's callers, and only they, get its error")
	// Idle again: a lone call goes alone, at once.
	require.NoError(t, g.do("alone"))
	assert.EqualValues(t, 4, g.calls.Load())
}
