package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/internal/testing/redistest"
	"github.com/flashgate/flashgate/issuer"
)

// Invariant 7 (docs/concepts.md#invariants): no request's bytes outlive the request. fasthttp
// and fiber hand out strings and slices that alias buffers they reuse for
// later requests; whatever outlives a request must be a copy. Once (found
// by test/faults TestStorm) the room id of a room's first enter, kept by the room's enter batcher, the
// registered-rooms set and the snapshot map, turned into other rooms' ids
// under load — enter batches ran against another room's keys, a phantom room
// was created from the default policy, and sync.Map panicked.

// zcEnv is a server on a redis-server of its own (so fg:rooms and every
// fg:{…}:config key are this test's) with a default room policy, as in the
// observed failure: a room id corrupted into another valid id silently
// creates a room.
//
// What a kept room id can harm is the enter calls its batcher sends after
// the request that made the batcher has ended, so the crowd must outgrow a
// batch: EnterBatch is 2, and every script takes 2 ms more, as over a
// network (loopback Redis answers so fast, and a -race build serves HTTP so
// slowly, that enters would hardly ever queue otherwise).
func zcEnv(t *testing.T) *env {
	t.Helper()
	rdb := redistest.Start(t).Client(t)
	rdb.AddHook(scriptLatency(2 * time.Millisecond))
	return newEnv(t, withRedis(rdb), withIssuer(func(c *issuer.Config) {
		c.DefaultRoom = &issuer.RoomConfig{Capacity: 2, RatePerMinute: 60_000}
		c.EnterBatch = 2
	}))
}

// scriptLatency is a go-redis hook that delays every script call (EVAL, EVALSHA).
type scriptLatency time.Duration

func (scriptLatency) DialHook(next redis.DialHook) redis.DialHook { return next }
func (scriptLatency) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (d scriptLatency) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "eval" || n == "evalsha" {
			time.Sleep(time.Duration(d))
		}
		return next(ctx, cmd)
	}
}

// zcClient keeps its connections alive, so fasthttp serves many requests
// with one request context and its buffers.
func zcClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		MaxIdleConns: 64, MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute}}
}

// call sends one request and returns its answer; a transport error is an answer with status 0.
func call(cl *http.Client, method, url, user, bearer, body string) resp {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, err := http.NewRequest(method, url, rd)
	if err != nil {
		return resp{body: []byte(err.Error())}
	}
	if user != "" {
		r.Header.Set("X-User-ID", user)
	}
	if bearer != "" {
		r.Header.Set("Authorization", "Bearer "+bearer)
	}
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	res, err := cl.Do(r)
	if err != nil {
		return resp{body: []byte(err.Error())}
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

// failures collects what goroutines saw go wrong (t.FailNow must not be
// called off the test goroutine), keeping the first few for the report.
type failures struct {
	mu    sync.Mutex
	n     int
	first []string
}

func (f *failures) add(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if len(f.first) < 10 {
		f.first = append(f.first, fmt.Sprintf(format, args...))
	}
}

func (f *failures) check(t *testing.T, what string) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n > 0 {
		t.Errorf("%d %s went wrong; first:\n  %s", f.n, what, strings.Join(f.first, "\n  "))
	}
}

// checkEntry reports an enter or status answer that is not 200 with an
// Entry of room in one of states.
func checkEntry(f *failures, what string, r resp, room string, states ...string) {
	var m struct {
		Room         string `json:"room"`
		State        string `json:"state"`
		WaitingToken string `json:"waiting_token"`
	}
	if r.status != 200 || json.Unmarshal(r.body, &m) != nil {
		f.add("%s: %d %s", what, r.status, r.body)
		return
	}
	if m.Room != room || !slices.Contains(states, m.State) || m.WaitingToken == "" {
		f.add("%s: room %q state %q token %q, want room %q", what, m.Room, m.State, m.WaitingToken, room)
	}
}

// assertOnlyRooms asserts that Redis knows exactly rooms: the registered
// set fg:rooms and the rooms' config keys (a room created from the default
// policy under a corrupted id would add both).
func assertOnlyRooms(t *testing.T, rdb *redis.Client, rooms ...string) {
	t.Helper()
	ctx := context.Background()
	registered, err := rdb.SMembers(ctx, "fg:rooms").Result()
	require.NoError(t, err)
	assert.ElementsMatch(t, rooms, registered, "fg:rooms")
	configs, err := rdb.Keys(ctx, "fg:{*}:config").Result()
	require.NoError(t, err)
	var want []string
	for _, r := range rooms {
		want = append(want, roomKey(r, "config"))
	}
	assert.ElementsMatch(t, want, configs, "room config keys")
}

// assertUsers asserts that room's line and admissions hold exactly users
// (the waiting ZSET and the user index).
func assertUsers(t *testing.T, rdb *redis.Client, room string, users []string) {
	t.Helper()
	ctx := context.Background()
	waiting, err := rdb.ZRange(ctx, roomKey(room, "waiting"), 0, -1).Result()
	require.NoError(t, err)
	indexed, err := rdb.HKeys(ctx, roomKey(room, "users")).Result()
	require.NoError(t, err)
	got := map[string]bool{}
	for _, u := range append(waiting, indexed...) {
		got[u] = true
	}
	var missing, extra []string
	for _, u := range users {
		if !got[u] {
			missing = append(missing, u)
		}
		delete(got, u)
	}
	for u := range got {
		extra = append(extra, u)
	}
	assert.Empty(t, missing, "users that entered room %s but are not in it", room)
	assert.Empty(t, extra, "users in room %s that never entered it", room)
}

// sameLengthRooms returns n fresh room ids of one length: an id overwritten
// by another request's path then reads as another valid room id.
func sameLengthRooms(t *testing.T, n int) []string {
	var rooms []string
	for range n {
		rooms = append(rooms, redistest.Room("zc"))
		require.Len(t, rooms[len(rooms)-1], len(rooms[0]))
	}
	return rooms
}

// TestRequestBytesDoNotOutliveTheRequest reproduces the storm's interleaving (test/faults TestStorm)
// over a real loopback listener with keep-alive connections: concurrent
// enters into several rooms, coalesced by the issuer, while the same server
// answers status polls for another room and completions with a query and a
// body. Every enter must answer 200 for its room, and Redis must afterwards
// hold exactly these rooms and, in each, exactly the users that entered it.
//
// A room's batcher kept the id its first enter passed; once fiber handed
// that request's buffers to a later request, the id read as another room's
// (or a new one) and the batcher's next calls went there. On the code before
// the fix this test failed in each of 50 runs, and of 100 runs with -race.
// Twelve rooms because a -race build's sync.Pool drops a quarter of what is
// put back, and a dropped buffer is never overwritten: with a few rooms,
// every kept id escaped now and then.
func TestRequestBytesDoNotOutliveTheRequest(t *testing.T) {
	e := zcEnv(t)
	base := e.listen()
	cl := zcClient()
	t.Cleanup(cl.CloseIdleConnections) // before the server's shutdown
	const rooms, enterers, perEnterer, others = 12, 48, 10, 4
	ids := sameLengthRooms(t, rooms+1)
	entered, other := ids[:rooms], ids[rooms]
	want := map[string][]string{} // room → users

	// bob in the polled room (its first enter creates it from the default policy).
	bob := call(cl, "POST", base+"/v1/rooms/"+other+"/enter", "bob", "", "")
	require.Equal(t, 200, bob.status, "body: %s", bob.body)
	bobTok := bob.json(t)["waiting_token"].(string)
	want[other] = []string{"bob"}

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var enterFails, otherFails failures
	var wgEnter, wgOther sync.WaitGroup
	done := make(chan struct{})
	for g := range enterers {
		var mine [][2]string // room, user
		for i := range perEnterer {
			room, u := entered[(g+i)%rooms], fmt.Sprintf("u%d-%d", g, i)
			mine = append(mine, [2]string{room, u})
			want[room] = append(want[room], u)
		}
		wgEnter.Add(1)
		go func() {
			defer wgEnter.Done()
			for _, ru := range mine {
				if ctx.Err() != nil {
					enterFails.add("out of time")
					return
				}
				r := call(cl, "POST", base+"/v1/rooms/"+ru[0]+"/enter", ru[1], "", "")
				checkEntry(&enterFails, "enter "+ru[1]+" into "+ru[0], r, ru[0], "ACTIVE", "WAITING")
			}
		}()
	}
	for g := range others {
		wgOther.Add(1)
		go func() {
			defer wgOther.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				case <-ctx.Done():
					return
				default:
				}
				if (g+i)%2 == 0 {
					r := call(cl, "GET", base+"/v1/rooms/"+other+"/status", "bob", bobTok, "")
					checkEntry(&otherFails, "status of bob", r, other, "ACTIVE")
					continue
				}
				// A junk admission token: refused offline, after the query and
				// the body were read into the request's buffers.
				product := entered[i%rooms]
				r := call(cl, "POST", base+"/v1/complete?product="+product, "bob", "eyJhbGciOiJFZERTQSJ9.e30.AAAA",
					`{"product":"`+product+`"}`)
				if r.status != 401 || !strings.Contains(string(r.body), "invalid_admission_token") {
					otherFails.add("complete: %d %s", r.status, r.body)
				}
			}
		}()
	}
	wgEnter.Wait()
	close(done)
	wgOther.Wait()

	enterFails.check(t, "enters")
	otherFails.check(t, "status and complete requests")
	assertOnlyRooms(t, e.rdb, ids...)
	for room, users := range want {
		assertUsers(t, e.rdb, room, users)
	}
}

// poison overwrites, once a request has been answered, every request byte
// fasthttp and fiber reuse for later requests: fiber's decoded path (route
// parameters alias it), the URI's path, query string and arguments, the
// request line, every header value and the body. A string or slice of the
// request kept past it then reads "ZZZ…" at once instead of turning into
// another request's bytes some time later. Values of one byte are left
// alone: fasthttp answers an empty path with its constant "/".
func poison(c *fiber.Ctx) {
	r := c.Request()
	if r.Header.IsHead() {
		return // fasthttp reads the method again to leave out a HEAD answer's body
	}
	fill := func(b []byte) {
		if len(b) > 1 {
			for i := range b {
				b[i] = 'Z'
			}
		}
	}
	p := c.Path()
	fill(unsafe.Slice(unsafe.StringData(p), len(p)))
	u := r.URI()
	fill(u.PathOriginal())
	fill(u.Path())
	fill(u.QueryString())
	u.QueryArgs().VisitAll(func(k, v []byte) { fill(k); fill(v) })
	fill(r.Header.RequestURI())
	fill(r.Header.Method())
	r.Header.VisitAll(func(k, v []byte) {
		// Keys may be fasthttp's constants, and so may the value of
		// "Connection: close".
		if !strings.EqualFold(string(k), fiber.HeaderConnection) {
			fill(v)
		}
	})
	fill(r.Body())
}

// TestPoisonedRequestBuffers runs every kind of request — enter, status,
// exchange, completion, leave, event streams, the admin API, metrics — a few
// at a time on keep-alive connections, with each request's buffers
// overwritten as soon as it has been answered (poison). Anything the server
// or the issuer kept of a request would then change under them. Every answer
// must be right for its room and user, and afterwards Redis must hold
// exactly the rooms used, with the counts the requests imply.
func TestPoisonedRequestBuffers(t *testing.T) {
	e := zcEnv(t)
	e.srv.afterRequest = poison
	e.srv.sseInterval = 20 * time.Millisecond
	base := e.listen()
	cl := zcClient()
	t.Cleanup(cl.CloseIdleConnections)
	const rooms, rounds, perRoom = 4, 2, 4 // capacity 2: two users of each round are admitted, two wait
	ids := sameLengthRooms(t, rooms+1)
	entered, adminRoom := ids[:rooms], ids[rooms]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var fails failures

	// flow takes one user through the API: enter; status; if admitted,
	// exchange and complete; if waiting, follow the event stream, then leave.
	// It reports whether the user was admitted.
	flow := func(room, user string) (admitted bool) {
		r := call(cl, "POST", base+"/v1/rooms/"+room+"/enter", user, "", "")
		checkEntry(&fails, "enter "+user, r, room, "ACTIVE", "WAITING")
		var en Entry
		if json.Unmarshal(r.body, &en) != nil || en.WaitingToken == "" {
			return false
		}
		r = call(cl, "GET", base+"/v1/rooms/"+room+"/status", user, en.WaitingToken, "")
		checkEntry(&fails, "status of "+user, r, room, en.State)
		if en.State == "ACTIVE" {
			r = call(cl, "POST", base+"/v1/rooms/"+room+"/exchange", user, en.WaitingToken, "")
			var x ExchangeResponse
			if r.status != 200 || json.Unmarshal(r.body, &x) != nil || x.AdmissionID != en.AdmissionID {
				fails.add("exchange for %s: %d %s", user, r.status, r.body)
				return true
			}
			r = call(cl, "POST", base+"/v1/complete?product="+room, user, x.AdmissionToken, `{"product":"`+room+`"}`)
			var done CompleteResponse
			if r.status != 200 || json.Unmarshal(r.body, &done) != nil || done.AdmissionID != x.AdmissionID || done.Repeated {
				fails.add("complete for %s: %d %s", user, r.status, r.body)
			}
			r = call(cl, "GET", base+"/v1/rooms/"+room+"/status", user, en.WaitingToken, "")
			checkEntry(&fails, "status of "+user+" after completion", r, room, "COMPLETED")
			return true
		}
		stream(&fails, cl, base+"/v1/rooms/"+room+"/events?waiting_token="+en.WaitingToken, user, room, en.Arrival)
		r = call(cl, "POST", base+"/v1/rooms/"+room+"/leave", user, en.WaitingToken, "")
		if r.status != 204 {
			fails.add("leave for %s: %d %s", user, r.status, r.body)
		}
		r = call(cl, "GET", base+"/v1/rooms/"+room+"/status", user, en.WaitingToken, "")
		checkEntry(&fails, "status of "+user+" after leaving", r, room, "NOT_FOUND")
		return false
	}

	var wg sync.WaitGroup
	admitted := make([]int, rooms)
	for round := range rounds {
		var mu sync.Mutex
		for k, room := range entered {
			for i := range perRoom {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if ctx.Err() == nil && flow(room, fmt.Sprintf("u%d-%d-%d", k, round, i)) {
						mu.Lock()
						admitted[k]++
						mu.Unlock()
					}
				}()
			}
		}
		wg.Add(1)
		go func() { // the admin API beside them
			defer wg.Done()
			admin := func(method, path, body string, status int, want map[string]any) {
				r := call(cl, method, base+"/admin/rooms/"+adminRoom+path, "", adminToken, body)
				var m map[string]any
				if r.status != status || json.Unmarshal(r.body, &m) != nil {
					fails.add("%s /admin/rooms/…%s: %d %s", method, path, r.status, r.body)
					return
				}
				for k, v := range want {
					if fmt.Sprint(m[k]) != fmt.Sprint(v) {
						fails.add("%s /admin/rooms/…%s: %s = %v, want %v", method, path, k, m[k], v)
					}
				}
			}
			status := 200
			if round == 0 {
				status = 201
			}
			admin("PUT", "", `{"capacity":3,"state":"paused"}`, status, map[string]any{"room": adminRoom, "capacity": 3, "state": "paused"})
			admin("GET", "", "", 200, map[string]any{"room": adminRoom, "capacity": 3})
			admin("POST", "/open", "", 200, map[string]any{"room": adminRoom, "state": "open"})
			admin("GET", "/stats", "", 200, map[string]any{"room": adminRoom, "state": "open"})
		}()
		wg.Wait()
	}

	m := call(cl, "GET", base+"/metrics", "", "", "")
	require.Equal(t, 200, m.status)
	require.Contains(t, string(m.body), `flashgate_http_requests_total{method="POST",route="/v1/rooms/:room/enter",status="200"}`)
	assert.NotContains(t, string(m.body), "ZZ", "a metric label kept a request's bytes")

	fails.check(t, "requests")
	assertOnlyRooms(t, e.rdb, ids...)
	for k, room := range entered {
		assertUsers(t, e.rdb, room, nil) // everyone completed or left
		st, err := e.is.Stats(context.Background(), room)
		require.NoError(t, err)
		assert.Equal(t, []int64{rounds * perRoom, int64(admitted[k]), rounds*perRoom - int64(admitted[k])},
			[]int64{st.Entered, st.Completed, st.Left}, "room %s: entered, completed, left", room)
		assert.Equal(t, int64(rounds*2), st.Completed, "room %s: two admitted per round (capacity 2)", room)
	}
}

// stream reads three events of a waiting user's event stream; each must be
// the user's WAITING entry in room. They are sent after the request was
// answered (and poisoned).
func stream(f *failures, cl *http.Client, url, user, room string, arrival int64) {
	hr, err := http.NewRequest("GET", url, nil)
	if err != nil {
		f.add("events for %s: %v", user, err)
		return
	}
	hr.Header.Set("X-User-ID", user)
	res, err := cl.Do(hr)
	if err != nil {
		f.add("events for %s: %v", user, err)
		return
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		f.add("events for %s: %d", user, res.StatusCode)
		return
	}
	br := bufio.NewReader(res.Body)
	for range 3 {
		ev, err := readEvent(br)
		var en Entry
		if err != nil || ev.event != "status" || json.Unmarshal([]byte(ev.data), &en) != nil ||
			en.Room != room || en.State != "WAITING" || en.Arrival != arrival {
			f.add("event for %s: %v %q %s", user, err, ev.event, ev.data)
			return
		}
	}
}

// keptLog keeps every record it is handed, as a buffering or asynchronous
// slog.Handler may (slog.Record.Clone copies attributes, not the strings).
type keptLog struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (*keptLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *keptLog) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}
func (h *keptLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *keptLog) WithGroup(string) slog.Handler      { return h }

// A failed request is logged with its method and path: what the logger
// keeps must be copies too.
func TestLoggedRequestValuesAreCopies(t *testing.T) {
	logs := &keptLog{}
	e := newEnv(t, withOptions(func(o *Options) { o.Logger = slog.New(logs) }))
	e.srv.afterRequest = poison
	room := e.room(issuer.RoomConfig{})
	// A Redis error reply (WRONGTYPE inside the enter script) is a 503 that is
	// logged with its cause; outages are only counted.
	require.NoError(t, e.rdb.Set(context.Background(), roomKey(room, "waiting"), "not a zset", 0).Err())
	path := "/v1/rooms/" + room + "/enter"
	e.do(req{method: "POST", path: path, user: "alice"}).problem(t, 503, "unavailable")

	logs.mu.Lock()
	defer logs.mu.Unlock()
	require.Len(t, logs.recs, 1)
	got := map[string]string{}
	logs.recs[0].Attrs(func(a slog.Attr) bool { got[a.Key] = a.Value.String(); return true })
	assert.Equal(t, "POST", got["method"])
	assert.Equal(t, path, got["path"])
}
