package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/problem"
)

// An ALTCHA vector computed outside Go (Python's hashlib and hmac, from the
// format ALTCHA documents): challenge = hex(SHA-256(salt + "31337")),
// signature = hex(HMAC-SHA256("secret hmac key", challenge)); the payload
// is base64(JSON) with the widget's extra "took" member.
const (
	vecKey       = "secret hmac key"
	vecSalt      = "46a8ba5ee6b85c3d5e3b1b2a?expires=1893456000&v=abc&"
	vecNumber    = 31337
	vecChallenge = "eaad41b71a8aa7776862be7e28226fba16dab7ada2f5a2298a99638d93a95223"
	vecSignature = "583933859abca5a610ed42ff74e29792809b08c848854b630f3b0478b5ee3ffc"
	vecPayload   = "eyJhbGdvcml0aG0iOiAiU0hBLTI1NiIsICJjaGFsbGVuZ2UiOiAiZWFhZDQxYjcxYThhYTc3NzY4NjJiZTdlMjgyMjZmYmExNmRhYjdhZGEyZjVhMjI5OGE5OTYzOGQ5M2E5NTIyMyIsICJudW1iZXIiOiAzMTMzNywgInNhbHQiOiAiNDZhOGJhNWVlNmI4NWMzZDVlM2IxYjJhP2V4cGlyZXM9MTg5MzQ1NjAwMCZ2PWFiYyYiLCAic2lnbmF0dXJlIjogIjU4MzkzMzg1OWFiY2E1YTYxMGVkNDJmZjc0ZTI5NzkyODA5YjA4Yzg0ODg1NGI2MzBmM2IwNDc4YjVlZTNmZmMiLCAidG9vayI6IDgxMn0="
)

// altchaPayloadOf is the widget's payload for a solution.
func altchaPayloadOf(t testing.TB, alg, challenge string, number any, salt, signature string) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"algorithm": alg, "challenge": challenge, "number": number, "salt": salt,
		"signature": signature, "took": 5})
	require.NoError(t, err)
	return base64.StdEncoding.EncodeToString(b)
}

func TestALTCHAVector(t *testing.T) {
	require.Equal(t, vecChallenge, altchaChallenge(vecSalt, vecNumber))
	require.Equal(t, vecSignature, hex.EncodeToString(altchaSign([]byte(vecKey), vecChallenge)))
	params, err := verifyALTCHA([]byte(vecKey), vecPayload)
	require.NoError(t, err)
	assert.Equal(t, "1893456000", params.Get("expires"))
	assert.Equal(t, "abc", params.Get("v"))
	// Unpadded base64 is accepted too.
	_, err = verifyALTCHA([]byte(vecKey), strings.TrimRight(vecPayload, "="))
	require.NoError(t, err)

	// Every refusal, by kind.
	splicedSalt := strings.TrimSuffix(vecSalt, "&") // "…&v=abc" + "31337": a digit could move
	for name, c := range map[string]struct {
		payload string
		want    error
	}{
		"wrong key":       {altchaPayloadOf(t, "SHA-256", vecChallenge, vecNumber, vecSalt, hex.EncodeToString(altchaSign([]byte("other"), vecChallenge))), errPoWWrong},
		"wrong number":    {altchaPayloadOf(t, "SHA-256", vecChallenge, vecNumber+1, vecSalt, vecSignature), errPoWWrong},
		"other salt":      {altchaPayloadOf(t, "SHA-256", vecChallenge, vecNumber, strings.Replace(vecSalt, "1893456000", "1893456999", 1), vecSignature), errPoWWrong},
		"no & terminator": {altchaPayloadOf(t, "SHA-256", altchaChallenge(splicedSalt, vecNumber), vecNumber, splicedSalt, hex.EncodeToString(altchaSign([]byte(vecKey), altchaChallenge(splicedSalt, vecNumber)))), errPoWMalformed},
		"no params":       {altchaPayloadOf(t, "SHA-256", vecChallenge, vecNumber, "46a8ba5ee6b85c3d5e3b1b2a&", vecSignature), errPoWMalformed},
		"SHA-1":           {altchaPayloadOf(t, "SHA-1", vecChallenge, vecNumber, vecSalt, vecSignature), errPoWMalformed},
		"negative number": {altchaPayloadOf(t, "SHA-256", vecChallenge, -1, vecSalt, vecSignature), errPoWMalformed},
		"fraction":        {altchaPayloadOf(t, "SHA-256", vecChallenge, 1.5, vecSalt, vecSignature), errPoWMalformed},
		"string number":   {altchaPayloadOf(t, "SHA-256", vecChallenge, "31337", vecSalt, vecSignature), errPoWMalformed},
		"short challenge": {altchaPayloadOf(t, "SHA-256", vecChallenge[:10], vecNumber, vecSalt, vecSignature), errPoWMalformed},
		"not base64":      {"%%%", errPoWMalformed},
		"not JSON":        {base64.StdEncoding.EncodeToString([]byte("[1,2]")), errPoWMalformed},
		"too long":        {strings.Repeat("A", maxPoWPayload+4), errPoWMalformed},
	} {
		_, err := verifyALTCHA([]byte(vecKey), c.payload)
		assert.ErrorIs(t, err, c.want, name)
	}
}

// solvePoW finds the number of ch the way a client does, and returns the
// payload.
func solvePoW(t testing.TB, ch map[string]any) string {
	t.Helper()
	salt, want := ch["salt"].(string), ch["challenge"].(string)
	maxN := int64(ch["maxnumber"].(float64))
	for n := int64(0); n <= maxN; n++ {
		if altchaChallenge(salt, n) == want {
			return altchaPayloadOf(t, ch["algorithm"].(string), want, n, salt, ch["signature"].(string))
		}
	}
	t.Fatalf("no solution in [0, %d]", maxN)
	return ""
}

func cookieHeader(kv ...string) map[string]string {
	var parts []string
	for i := 0; i+1 < len(kv); i += 2 {
		parts = append(parts, kv[i]+"="+kv[i+1])
	}
	return map[string]string{"Cookie": strings.Join(parts, "; ")}
}

// TestEnterPoW: in visitor mode with EnterPoW on, a first enter without a
// solution is 428 pow_required with a challenge for the visitor it mints,
// and changes nothing; the solution enters and sets the pass, with which
// later enters need none; a solution is refused for another visitor, once
// expired, or when wrong; status needs none.
func TestEnterPoW(t *testing.T) {
	e := newEnv(t, visitorMode(func(o *Options) { o.EnterPoW = 8 }))
	room := e.room(issuer.RoomConfig{Capacity: 1})
	_, err := e.is.Enter(context.Background(), room, "holder")
	require.NoError(t, err)
	enter := "/v1/rooms/" + room + "/enter"

	r := e.do(req{method: "POST", path: enter})
	p := r.problem(t, 428, problem.PoWRequired)
	vis := visitorCookie(t, r, true)
	require.Nil(t, r.cookies()[PoWCookie])
	ch := p["challenge"].(map[string]any)
	assert.Equal(t, PoWAlgorithm, ch["algorithm"])
	assert.EqualValues(t, 256, ch["maxnumber"])
	assert.Regexp(t, `^[0-9a-f]{24}\?expires=\d+&v=[0-9a-f]{24}&$`, ch["salt"])
	assert.Empty(t, e.waitingUsers(room))

	sol := solvePoW(t, ch)
	body := `{"pow":` + strconv.Quote(sol) + `}`

	// The solution for this visitor is refused to another (a fresh cookie).
	r = e.do(req{method: "POST", path: enter, body: body})
	p = r.problem(t, 428, problem.PoWRequired)
	assert.Contains(t, p["detail"], "issued to another visitor")
	assert.Empty(t, e.waitingUsers(room))

	// A wrong number is refused.
	var pl map[string]any
	raw, _ := base64.StdEncoding.DecodeString(sol)
	require.NoError(t, json.Unmarshal(raw, &pl))
	wrong := altchaPayloadOf(t, PoWAlgorithm, pl["challenge"].(string), int64(pl["number"].(float64))+1, pl["salt"].(string), pl["signature"].(string))
	r = e.do(req{method: "POST", path: enter, body: `{"pow":"` + wrong + `"}`, hdr: cookieHeader(VisitorHostCookie, vis)})
	p = r.problem(t, 428, problem.PoWRequired)
	assert.Contains(t, p["detail"], "does not solve")

	// The visitor's own solution enters and sets the pass.
	r = e.do(req{method: "POST", path: enter, body: body, hdr: cookieHeader(VisitorHostCookie, vis)})
	require.Equal(t, 200, r.status, "%s", r.body)
	entry := r.json(t)
	require.Equal(t, "WAITING", entry["state"])
	pass := r.cookies()[PoWCookie]
	require.NotNil(t, pass)
	assert.True(t, pass.HttpOnly)
	assert.True(t, pass.Secure)
	assert.Equal(t, "/", pass.Path)
	assert.Equal(t, int(VisitorMaxAge/time.Second), pass.MaxAge)
	require.Len(t, e.waitingUsers(room), 1)

	// With the pass, enters need no solution (the same place); the status
	// never needs one.
	both := cookieHeader(VisitorHostCookie, vis, PoWCookie, pass.Value)
	r = e.do(req{method: "POST", path: enter, hdr: both})
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.Equal(t, entry["arrival"], r.json(t)["arrival"])
	r = e.do(req{method: "GET", path: "/v1/rooms/" + room + "/status", bearer: entry["waiting_token"].(string), hdr: cookieHeader(VisitorHostCookie, vis)})
	require.Equal(t, 200, r.status, "%s", r.body)

	// A pass is the visitor's own: with another visitor cookie it is none.
	r = e.do(req{method: "POST", path: enter, hdr: cookieHeader(PoWCookie, pass.Value)})
	r.problem(t, 428, problem.PoWRequired)
	require.Len(t, e.waitingUsers(room), 1)

	// An expired challenge is refused.
	r = e.do(req{method: "POST", path: enter})
	vis2 := visitorCookie(t, r, true)
	sol2 := solvePoW(t, r.json(t)["challenge"].(map[string]any))
	e.srv.now = func() time.Time { return time.Now().Add(PoWChallengeTTL + 2*time.Second) }
	r = e.do(req{method: "POST", path: enter, body: `{"pow":"` + sol2 + `"}`, hdr: cookieHeader(VisitorHostCookie, vis2)})
	p = r.problem(t, 428, problem.PoWRequired)
	assert.Contains(t, p["detail"], "expired")
	require.Len(t, e.waitingUsers(room), 1)
}

// TestEnterPoWOff: without EnterPoW nothing asks for a proof of work, and
// GET /v1/challenge is 404.
func TestEnterPoWOff(t *testing.T) {
	e := newEnv(t, visitorMode())
	room := e.room(issuer.RoomConfig{Capacity: 1})
	r := e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter"})
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.Nil(t, r.cookies()[PoWCookie])
	e.do(req{method: "GET", path: "/v1/challenge"}).problem(t, 404, problem.UnknownRoute)
}

// TestPoWChallengeEndpoint: GET /v1/challenge answers the ALTCHA widget's
// challenge JSON for the request's visitor (minting one), and its solution
// enters that visitor.
func TestPoWChallengeEndpoint(t *testing.T) {
	e := newEnv(t, visitorMode(func(o *Options) { o.EnterPoW = 6 }))
	room := e.room(issuer.RoomConfig{Capacity: 1})
	r := e.do(req{method: "GET", path: "/v1/challenge"})
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.Equal(t, "no-store", r.header.Get("Cache-Control"))
	vis := visitorCookie(t, r, true)
	ch := r.json(t)
	assert.EqualValues(t, 64, ch["maxnumber"])
	sol := solvePoW(t, ch)
	r = e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", body: `{"pow":"` + sol + `"}`, hdr: cookieHeader(VisitorHostCookie, vis)})
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.NotNil(t, r.cookies()[PoWCookie])
}

// TestPagePoW: the waiting page of a visitor without the pass is the
// "checking" page and enters nobody; with the pass it enters as before.
func TestPagePoW(t *testing.T) {
	e := newEnv(t, visitorMode(func(o *Options) { o.EnterPoW = 6 }))
	room := e.room(issuer.RoomConfig{Capacity: 1})
	_, err := e.is.Enter(context.Background(), room, "holder")
	require.NoError(t, err)
	r := e.do(req{method: "GET", path: "/wait/" + room})
	require.Equal(t, 200, r.status)
	assert.Contains(t, string(r.body), `data-state="checking"`)
	assert.Contains(t, string(r.body), "Checking your browser")
	assert.Empty(t, e.waitingUsers(room))
	vis := visitorCookie(t, r, true)

	r = e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", hdr: cookieHeader(VisitorHostCookie, vis)})
	sol := solvePoW(t, r.problem(t, 428, problem.PoWRequired)["challenge"].(map[string]any))
	r = e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", body: `{"pow":"` + sol + `"}`, hdr: cookieHeader(VisitorHostCookie, vis)})
	require.Equal(t, 200, r.status, "%s", r.body)
	pass := r.cookies()[PoWCookie].Value

	r = e.do(req{method: "GET", path: "/wait/" + room, hdr: cookieHeader(VisitorHostCookie, vis, PoWCookie, pass)})
	require.Equal(t, 200, r.status)
	assert.Contains(t, string(r.body), `data-state="waiting"`)
	require.Len(t, e.waitingUsers(room), 1)
}

func TestEnterPoWOptions(t *testing.T) {
	ok := Options{Identity: IdentityVisitor, VisitorKey: testVisitorKey, EnterPoW: MaxEnterPoW}
	require.NoError(t, ok.Validate())
	for name, o := range map[string]Options{
		"negative":    {Identity: IdentityVisitor, VisitorKey: testVisitorKey, EnterPoW: -1},
		"too hard":    {Identity: IdentityVisitor, VisitorKey: testVisitorKey, EnterPoW: MaxEnterPoW + 1},
		"header mode": {EnterPoW: 10},
	} {
		assert.ErrorContains(t, o.Validate(), "EnterPoW", name)
	}
}

// BenchmarkPoWVerify is the server's cost of one check (pow.verify: the
// base64 and JSON of the payload, one SHA-256, one HMAC-SHA256, the bind
// tag's HMAC); BenchmarkPoWVerifyCrypto is the bare crypto of it, one
// HMAC-SHA256 and one SHA-256 with no flashgate around them.
func BenchmarkPoWVerify(b *testing.B) {
	p := newPoW(testVisitorKey, RecommendedEnterPoW)
	now := time.Now()
	ch := p.challenge("visitor", now)
	var sol string
	for n := int64(0); n <= ch.MaxNumber; n++ {
		if altchaChallenge(ch.Salt, n) == ch.Challenge {
			sol = altchaPayloadOf(b, ch.Algorithm, ch.Challenge, n, ch.Salt, ch.Signature)
			break
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := p.verify(sol, "visitor", now); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPoWVerifyCrypto(b *testing.B) {
	key, msg := testVisitorKey, []byte("46a8ba5ee6b85c3d5e3b1b2a?expires=1893456000&v=0123456789abcdef01234567&65536")
	for b.Loop() {
		sum := sha256.Sum256(msg)
		m := hmac.New(sha256.New, key)
		m.Write(sum[:])
		_ = m.Sum(nil)
	}
}

// BenchmarkPoWSolveNative is an attacker's cost of one solution at
// RecommendedEnterPoW in native Go on one core (the average search,
// 2^(bits−1) SHA-256): what bounds the places per minute one core buys.
func BenchmarkPoWSolveNative(b *testing.B) {
	salt := "46a8ba5ee6b85c3d5e3b1b2a?expires=1893456000&v=0123456789abcdef01234567&"
	half := int64(1) << (RecommendedEnterPoW - 1)
	buf := make([]byte, 0, 128)
	for b.Loop() {
		for n := int64(0); n < half; n++ {
			buf = strconv.AppendInt(append(buf[:0], salt...), n, 10)
			_ = sha256.Sum256(buf)
		}
	}
}

// TestPoWPlacesPerAddress (issue 31 §3): with the proof of work on, a place
// costs two counts of the per-address enter limit however a bot goes about
// it — the challenge from GET /v1/challenge and the solved enter — so the
// defaults (DefaultEnterPerAddress per DefaultEnterWindow) give one address
// 900 places a minute, the figure docs/security.md#abuse-limits states, not
// 1,800. Solved at 1 bit: the work is not what is measured here.
func TestPoWPlacesPerAddress(t *testing.T) {
	e := newEnv(t, privateRedis(), visitorMode(func(o *Options) {
		o.EnterPoW, o.EnterPerAddress, o.EnterWindow = 1, DefaultEnterPerAddress, time.Hour
	}))
	room := e.room(issuer.RoomConfig{Capacity: 1})
	_, err := e.is.Enter(context.Background(), room, "holder")
	require.NoError(t, err)
	places := 0
	for range DefaultEnterPerAddress {
		r := e.do(req{method: "GET", path: "/v1/challenge"})
		if r.status == 429 {
			break
		}
		require.Equal(t, 200, r.status, "%s", r.body)
		vis := visitorCookie(t, r, true)
		sol := solvePoW(t, r.json(t))
		r = e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", body: `{"pow":"` + sol + `"}`,
			hdr: cookieHeader(VisitorHostCookie, vis)})
		if r.status == 429 {
			break
		}
		require.Equal(t, 200, r.status, "%s", r.body)
		places++
	}
	assert.Equal(t, DefaultEnterPerAddress/2, places, "places per address and window")
	assert.Len(t, e.waitingUsers(room), places)
	perMinute := places * int(time.Minute/DefaultEnterWindow)
	assert.Equal(t, 900, perMinute, "docs/security.md: 900 places/min per address with PoW")

	// The other way (the 428 of an enter without a solution) costs the same.
	e = newEnv(t, privateRedis(), visitorMode(func(o *Options) {
		o.EnterPoW, o.EnterPerAddress, o.EnterWindow = 1, 20, time.Hour
	}))
	room = e.room(issuer.RoomConfig{Capacity: 1})
	places = 0
	for range 20 {
		r := e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter"})
		if r.status == 429 {
			break
		}
		p := r.problem(t, 428, problem.PoWRequired)
		vis := visitorCookie(t, r, true)
		sol := solvePoW(t, p["challenge"].(map[string]any))
		r = e.do(req{method: "POST", path: "/v1/rooms/" + room + "/enter", body: `{"pow":"` + sol + `"}`,
			hdr: cookieHeader(VisitorHostCookie, vis)})
		if r.status == 429 {
			break
		}
		require.Equal(t, 200, r.status, "%s", r.body)
		places++
	}
	assert.Equal(t, 10, places)
}
