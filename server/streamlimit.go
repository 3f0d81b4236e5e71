package server

import (
	"sync"
	"time"
)

// Event-stream limits (Options.StreamsPerUser, Options.StreamsPerAddress,
// Options.MaxStreams).
//
// An open stream holds a connection, one goroutine and a few hundred bytes
// on this replica (sse.go), and is placed again every poll_after: left
// unbounded, one waiting token opens hundreds (issue 23). The limits are kept in memory per
// replica: behind a load balancer spreading one client over N replicas, the
// effective limits are up to N times these. MaxStreams bounds the replica's
// total (its memory: docs/sizing.md m_stream per stream): one more is
// refused 429 with Retry-After, and the waiting page polls status instead.

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
	// counted: the slot holds one of the replica's total places (until
	// released, or replaced: the newer stream then holds it). Under
	// streamLimits.mu.
	counted bool
	// replaced is set when a newer stream of the same (room, user) took
	// this one's place; st is the stream once it runs (sse.go): whichever
	// of the two comes second sends the stream its final "replaced" event.
	mu       sync.Mutex
	replaced bool
	st       *sseStream
}

// streamLimits counts open streams per (room, user), per client address and
// in total.
type streamLimits struct {
	perUser, perAddr, total int // 0: no limit
	mu                      sync.Mutex
	users                   map[string][]*streamSlot // oldest first; at most perUser
	addrs                   map[string]int
	open                    int // registered slots, at most total
}

func newStreamLimits(perUser, perAddr, total int) *streamLimits {
	return &streamLimits{perUser: perUser, perAddr: perAddr, total: total,
		users: map[string][]*streamSlot{}, addrs: map[string]int{}}
}

// Why acquire refused a stream.
type streamRefusal int

const (
	streamOK           streamRefusal = iota
	streamAddressLimit               // the client address holds perAddr streams
	streamReplicaLimit               // the replica holds total streams
)

// acquire registers a new stream of user in room from addr (copies all;
// addr "" is not counted). refused is streamAddressLimit when addr already
// holds perAddr streams, streamReplicaLimit when the replica holds total
// streams and none of them is this (room, user)'s to replace: nothing is
// registered then. Otherwise, when the (room, user) already held perUser
// streams, the oldest is taken off the register and returned as evicted:
// the caller ends its stream (Server.replace). The slot must be released
// once its stream ends.
func (l *streamLimits) acquire(room, user, addr string) (slot, evicted *streamSlot, refused streamRefusal) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.countsAddr(addr) {
		addr = ""
	}
	if addr != "" && l.addrs[addr] >= l.perAddr {
		return nil, nil, streamAddressLimit
	}
	key := room + "\x00" + user
	held := l.users[key]
	replaces := l.perUser > 0 && len(held) >= l.perUser
	if l.total > 0 && l.open >= l.total && !replaces {
		return nil, nil, streamReplicaLimit
	}
	slot = &streamSlot{key: key, addr: addr, counted: true}
	if addr != "" {
		l.addrs[addr]++
	}
	l.open++
	if l.perUser <= 0 {
		return slot, nil, streamOK
	}
	if replaces {
		evicted = held[0]
		evicted.counted = false // its place is this one's: released without giving it back
		held[0] = nil
		held = held[1:]
		l.open--
	}
	l.users[key] = append(held, slot)
	return slot, evicted, streamOK
}

func (l *streamLimits) countsAddr(addr string) bool { return l.perAddr > 0 && addr != "" }

// release gives slot's places back: its (room, user) place unless a newer
// stream already took it, and its address's. Each slot is released once.
func (l *streamLimits) release(slot *streamSlot) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if slot.counted {
		slot.counted = false
		l.open--
	}
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

// opened reports the streams registered for (room, user), from addr and in
// total (tests).
func (l *streamLimits) opened(room, user, addr string) (perUser, perAddr, total int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.users[room+"\x00"+user]), l.addrs[addr], l.open
}
