//go:build linux

package streams

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The benchmark's processes are this test binary in one of three roles,
// chosen by roleEnv (TestMain): none, the benchmark itself; "client", a
// client process holding event streams; "bare", the limit row's server.
const (
	roleEnv   = "FLASHGATE_STREAMS_ROLE"
	targetEnv = "FLASHGATE_STREAMS_TARGET" // client: host:port of the server
	roomEnv   = "FLASHGATE_STREAMS_ROOM"   // client: the room
	usersEnv  = "FLASHGATE_STREAMS_USERS"  // client: file of "user token" lines, one stream each
	octetEnv  = "FLASHGATE_STREAMS_OCTET"  // client: source addresses 127.<octet>.y.z
)

// perSource is how many streams a client opens from one loopback source
// address: the default FLASHGATE_STREAMS_PER_ADDRESS (100).
const perSource = 100

// openers bounds a client's streams being opened at once (dialled, first
// event not yet read).
const openers = 64

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "":
		os.Exit(m.Run())
	case "client":
		os.Exit(runClient())
	case "bare":
		os.Exit(runBare())
	default:
		fmt.Fprintf(os.Stderr, "%s=%q: want client or bare\n", roleEnv, os.Getenv(roleEnv))
		os.Exit(2)
	}
}

// out writes the protocol's lines to stdout, one at a time.
var outMu sync.Mutex

func say(format string, args ...any) {
	outMu.Lock()
	defer outMu.Unlock()
	fmt.Fprintf(os.Stdout, format+"\n", args...)
}

// sourceIP is the loopback source address of a client's stream i.
func sourceIP(octet, i int) net.IP {
	a := i / perSource
	return net.IPv4(127, byte(octet), byte(a/250), byte(a%250+1))
}

// events counts the status events a client process's streams received
// ("count" prints it).
var events atomic.Int64

// cstream is one stream of a client process.
type cstream struct {
	ok    atomic.Bool  // its first event arrived
	ended atomic.Bool  // its connection ended (or never opened)
	seen  atomic.Int64 // unix ns of its first line carrying the armed room state (0: none yet)
}

// clientReport is a client's answer to "report <t0>".
type clientReport struct {
	Held   int       `json:"held"`   // streams open now
	Seen   int       `json:"seen"`   // streams that saw the armed state
	Ended  int       `json:"ended"`  // opened streams that ended before seeing it
	Missed int       `json:"missed"` // open streams that have not seen it
	LatMs  []float64 `json:"lat_ms"` // per seen stream, ms from t0, sorted
}

// runClient is the "client" role: it opens one event stream per line of
// the users file to the target, from source addresses 127.<octet>.y.z (at
// most perSource each), prints "ready <opened> <failed> <ms> <first
// failure>" once every stream got its first event (or failed), then
// answers its stdin: "arm <state>" (prints "armed", then "seen <n>" once
// every open stream has shown room_state <state> since, or after 30 s),
// "report <t0 unix ns>" (prints a clientReport as JSON), "count" (prints
// "count <events received so far>"). It exits when
// stdin closes: the kernel closes its connections.
func runClient() int {
	target, room := os.Getenv(targetEnv), os.Getenv(roomEnv)
	octet, err := strconv.Atoi(os.Getenv(octetEnv))
	if err != nil || octet < 1 || octet > 254 {
		fmt.Fprintf(os.Stderr, "%s: %v\n", octetEnv, err)
		return 2
	}
	raw, err := os.ReadFile(os.Getenv(usersEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	st := make([]cstream, len(lines))
	var want atomic.Pointer[[]byte]
	var opened, failed atomic.Int64
	var firstErr atomic.Pointer[string]
	fail := func(i int, msg string) {
		st[i].ended.Store(true)
		failed.Add(1)
		firstErr.CompareAndSwap(nil, &msg)
	}
	sem := make(chan struct{}, openers)
	start := time.Now()
	for i, l := range lines {
		user, tok, _ := strings.Cut(l, " ")
		sem <- struct{}{}
		go func() {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: sourceIP(octet, i)}, Timeout: 10 * time.Second}
			c, err := d.Dial("tcp", target)
			if err != nil {
				<-sem
				fail(i, strings.ReplaceAll(err.Error(), " ", "_"))
				return
			}
			defer c.Close()
			fmt.Fprintf(c, "GET /v1/rooms/%s/events?waiting_token=%s HTTP/1.1\r\nHost: %s\r\nX-User-ID: %s\r\n\r\n", room, tok, target, user)
			br := bufio.NewReaderSize(c, 2048)
			status, err := br.ReadSlice('\n')
			if err != nil || !bytes.HasPrefix(status, []byte("HTTP/1.1 200")) {
				<-sem
				fail(i, strings.ReplaceAll(strings.TrimSpace(string(status)), " ", "_"))
				return
			}
			first := true
			for {
				line, err := br.ReadSlice('\n')
				if err != nil && err != bufio.ErrBufferFull {
					if first {
						<-sem
						fail(i, "ended_before_first_event")
					}
					st[i].ended.Store(true)
					return
				}
				if bytes.HasPrefix(line, []byte("data: ")) {
					events.Add(1)
				}
				if first && bytes.HasPrefix(line, []byte("data: ")) {
					first = false
					st[i].ok.Store(true)
					opened.Add(1)
					<-sem
				}
				if w := want.Load(); w != nil && st[i].seen.Load() == 0 && bytes.Contains(line, *w) {
					st[i].seen.Store(time.Now().UnixNano())
				}
			}
		}()
	}
	deadline := time.Now().Add(90 * time.Second)
	for opened.Load()+failed.Load() < int64(len(lines)) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	fe := "-"
	if p := firstErr.Load(); p != nil {
		fe = *p
	}
	say("ready %d %d %d %s", opened.Load(), failed.Load(), time.Since(start).Milliseconds(), fe)

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "arm":
			want.Store(nil)
			for i := range st {
				st[i].seen.Store(0)
			}
			w := []byte(`"room_state":"` + arg + `"`)
			want.Store(&w)
			say("armed")
			go func() {
				until := time.Now().Add(30 * time.Second)
				for {
					seen, pending := 0, 0
					for i := range st {
						switch {
						case !st[i].ok.Load():
						case st[i].seen.Load() != 0:
							seen++
						case !st[i].ended.Load():
							pending++
						}
					}
					if pending == 0 || time.Now().After(until) {
						say("seen %d %d", seen, pending)
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
			}()
		case "count":
			say("count %d", events.Load())
		case "report":
			t0, _ := strconv.ParseInt(arg, 10, 64)
			var r clientReport
			for i := range st {
				if !st[i].ok.Load() {
					continue
				}
				ended := st[i].ended.Load()
				if !ended {
					r.Held++
				}
				switch s := st[i].seen.Load(); {
				case s != 0:
					r.Seen++
					r.LatMs = append(r.LatMs, float64(s-t0)/1e6)
				case ended:
					r.Ended++
				default:
					r.Missed++
				}
			}
			slices.Sort(r.LatMs)
			b, _ := json.Marshal(r)
			say("%s", b)
		}
	}
	return 0
}

// bareServer is the limit row's server: what holding a stream costs
// without flashgate.
type bareServer struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// runBare is the "bare" role: a server on 127.0.0.1 (it prints "listen
// <addr>") that answers any request with an event-stream response header
// and one event (room_state "paused"), then holds the connection with one
// goroutine blocked reading it. Its stdin: "mem" (prints "mem <heap+stack
// bytes after a GC> <goroutines> <rss bytes> <connections>"), "fanout
// <state>" (writes one event with room_state <state> to every connection
// in turn, then prints "sent <ms>"). It exits when stdin closes.
func runBare() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s := &bareServer{conns: map[net.Conn]struct{}{}}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					continue
				}
				if strings.Contains(err.Error(), "too many open files") {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				return
			}
			go s.serve(c)
		}
	}()
	say("listen %s", ln.Addr())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "mem":
			runtime.GC()
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			s.mu.Lock()
			n := len(s.conns)
			s.mu.Unlock()
			say("mem %d %d %d %d", m.HeapInuse+m.StackInuse, runtime.NumGoroutine(), rssOf(os.Getpid()), n)
		case "fanout":
			ev := chunk(`event: status` + "\n" + `data: {"state":"WAITING","room_state":"` + arg + `"}` + "\n\n")
			s.mu.Lock()
			list := make([]net.Conn, 0, len(s.conns))
			for c := range s.conns {
				list = append(list, c)
			}
			s.mu.Unlock()
			t := time.Now()
			for _, c := range list {
				_ = c.SetWriteDeadline(time.Now().Add(250 * time.Millisecond))
				_, _ = c.Write(ev)
			}
			say("sent %.1f", float64(time.Since(t).Microseconds())/1e3)
		}
	}
	return 0
}

func chunk(data string) []byte {
	return []byte(strconv.FormatInt(int64(len(data)), 16) + "\r\n" + data + "\r\n")
}

// serve reads c's request header, answers the response header and the
// first event, and holds c until the client closes it.
func (s *bareServer) serve(c net.Conn) {
	if !readHeader(c) {
		_ = c.Close()
		return
	}
	_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n"+
		"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
	if err == nil {
		_, err = c.Write(chunk("event: status\ndata: {\"state\":\"WAITING\",\"room_state\":\"paused\"}\n\n"))
	}
	if err != nil {
		_ = c.Close()
		return
	}
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	var one [1]byte
	for {
		if _, err := c.Read(one[:]); err != nil {
			break
		}
	}
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	_ = c.Close()
}

// readHeader reads up to the end of an HTTP request header (its own frame,
// so that the holding goroutine's stack does not keep the buffer).
func readHeader(c net.Conn) bool {
	var buf [1024]byte
	n := 0
	for !bytes.Contains(buf[:n], []byte("\r\n\r\n")) {
		if n == len(buf) {
			return false
		}
		k, err := c.Read(buf[n:])
		if err != nil {
			return false
		}
		n += k
	}
	return true
}

// rssOf is pid's resident set (VmRSS of /proc/<pid>/status), in bytes (0
// when unreadable).
func rssOf(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}
