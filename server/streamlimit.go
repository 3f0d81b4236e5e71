package server

import (
	"sync"
	"time"
)

// Event-stream limits (Options.StreamsPerUser, Options.StreamsPerAddress).
//
// An open stream holds a connection, two goroutines and its poll timers on
// this replica, and re-runs Status every poll_after: left unbounded, one
// waiting token opens hundreds (issue 23). The limits are kept in memory per
// replica: behind a load balancer spreading one client over N replicas, the
// effective limits are up to N times these.

// Suggested stream limits: what `flashgate serve` uses unless told
// otherwise. Options' zero values disable the limits.
const (
	// DefaultStreamsPerUser: two tabs of one user in one room each keep a
	// stream; a third ends the oldest (event "replaced").
	DefaultStreamsPerUser = 2
	// DefaultStreamsPerAddress: one client address holds at most 100 open
	// streams; more are refused 429 (flashgate-client.js then polls status).
	// Many users share an address behind a NAT.
	DefaultStreamsPerAddress = 100
	// ReplacedRetry is the retry: (reconnection delay) of the final
	// "replaced" event, so that an EventSource whose stream another one
	// replaced does not reconnect at once and replace that one in turn.
	ReplacedRetry = 30 * time.Second
)

// streamSlot is one open event stream as the limits know it.
type streamSlot struct {
	key  string // room + "\x00" + user (copies)
	addr string // client address (a copy); "" when not counted
	// replaced is closed when a newer stream of the same (room, user) takes
	// this one's place; the stream then sends its final "replaced" event.
	replaced chan struct{}
}

// streamLimits counts open streams per (room, user) and per client address.
type streamLimits struct {
	perUser, perAddr int // 0: no limit
	mu               sync.Mutex
	users            map[string][]*streamSlot // oldest first; at most perUser
	addrs            map[string]int
}

func newStreamLimits(perUser, perAddr int) *streamLimits {
	return &streamLimits{perUser: perUser, perAddr: perAddr,
		users: map[string][]*streamSlot{}, addrs: map[string]int{}}
}

// acquire registers a new stream of user in room from addr (copies all;
// addr "" is not counted). ok is false when addr already holds perAddr
// streams: nothing is registered. Otherwise, when the (room, user) already
// held perUser streams, the oldest is taken off the register and signalled
// (its replaced channel closed) and returned as evicted, for counting. The
// slot must be released once its stream ends.
func (l *streamLimits) acquire(room, user, addr string) (slot *streamSlot, evicted bool, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.countsAddr(addr) {
		addr = ""
	}
	if addr != "" && l.addrs[addr] >= l.perAddr {
		return nil, false, false
	}
	slot = &streamSlot{key: room + "\x00" + user, addr: addr, replaced: make(chan struct{})}
	if addr != "" {
		l.addrs[addr]++
	}
	if l.perUser <= 0 {
		return slot, false, true
	}
	held := l.users[slot.key]
	if len(held) >= l.perUser {
		close(held[0].replaced)
		held[0] = nil
		held = held[1:]
		evicted = true
	}
	l.users[slot.key] = append(held, slot)
	return slot, evicted, true
}

func (l *streamLimits) countsAddr(addr string) bool { return l.perAddr > 0 && addr != "" }

// release gives slot's places back: its (room, user) place unless a newer
// stream already took it, and its address's. Each slot is released once.
func (l *streamLimits) release(slot *streamSlot) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if slot.addr != "" {
		if n := l.addrs[slot.addr] - 1; n > 0 {
			l.addrs[slot.addr] = n
		} else {
			delete(l.addrs, slot.addr)
		}
	}
	held := l.users[slot.key]
	for i, s := range held {
		if s == slot {
			held = append(held[:i:i], held[i+1:]...)
			break
		}
	}
	if len(held) == 0 {
		delete(l.users, slot.key)
	} else {
		l.users[slot.key] = held
	}
}

// open reports the streams registered for (room, user) and from addr (tests).
func (l *streamLimits) open(room, user, addr string) (perUser, perAddr int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.users[room+"\x00"+user]), l.addrs[addr]
}
