package server

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flashgate/flashgate/problem"
)

// Proof of work before the first enter (visitor mode, Options.EnterPoW).
//
// A visitor's first enter must carry the solution of a challenge the server
// signed for that visitor; it then gets a pass (PoWCookie) and enters freely
// from there on. The challenge is ALTCHA's (problem.PoWChallenge): the
// server picks a secret number n uniformly in [0, 2^bits] and sends
// SHA-256(salt + n) with an HMAC over it; the client tries n = 0, 1, …
// until the hash matches: 2^(bits−1) SHA-256 on average, 2^bits at most.
// The check is stateless (one SHA-256 and one HMAC-SHA256, no Redis): the
// salt carries the expiry and a tag of the visitor id, both under the
// signature (the salt is hashed into the challenge, which the HMAC covers).
//
// Replay: a solution is bound to the visitor it was issued for (the salt's
// v parameter), so it buys nothing another visitor can use, and that one
// visitor has one place per room however often it is sent. A client that
// wants N places must therefore mint N visitors and solve N challenges.
const (
	// PoWAlgorithm is the ALTCHA algorithm of every challenge.
	PoWAlgorithm = "SHA-256"
	// PoWChallengeTTL is how long a challenge can be solved and sent, from
	// its issue (the salt's expires parameter, Unix seconds).
	PoWChallengeTTL = 10 * time.Minute
	// MaxEnterPoW is the largest Options.EnterPoW, in bits: a ceiling
	// against typos (2^25 SHA-256 on average is hours of a phone's time
	// with WebCrypto).
	MaxEnterPoW = 26
	// RecommendedEnterPoW is the difficulty docs/security.md#abuse-limits recommends (FLASHGATE_ENTER_POW):
	// 2^13 SHA-256 on average, about 1.2–1.6 s in Chromium throttled 4–6× on a
	// loaded machine (docs/security.md#abuse-limits, TestBrowserEnterPoW).
	RecommendedEnterPoW = 14
	// PoWCookie is the pass of a visitor that has solved a challenge:
	// base64url(16-byte truncated HMAC-SHA256 of its visitor id), with the
	// attributes of VisitorCookie.
	PoWCookie = "flashgate_pow"
	// maxPoWPayload bounds a solution's length before it is decoded (a
	// widget's payload is about 300 characters).
	maxPoWPayload = 1024
	powKeyLabel   = "flashgate enter pow v1"
)

// pow issues and checks the challenges (nil when Options.EnterPoW is 0).
type pow struct {
	key  []byte // HMAC-SHA256(VisitorKey, powKeyLabel): the same on every replica
	bits int
}

func newPoW(visitorKey []byte, bits int) *pow {
	if bits == 0 {
		return nil
	}
	m := hmac.New(sha256.New, visitorKey)
	m.Write([]byte(powKeyLabel))
	return &pow{key: m.Sum(nil), bits: bits}
}

// mac is HMAC-SHA256(p.key, label || 0 || msg).
func (p *pow) mac(label, msg string) []byte {
	m := hmac.New(sha256.New, p.key)
	m.Write([]byte(label))
	m.Write([]byte{0})
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// bind is the salt's v parameter for visitor id: a tag, not the id itself.
func (p *pow) bind(id string) string { return hex.EncodeToString(p.mac("bind", id)[:12]) }

// pass is the PoWCookie value for visitor id.
func (p *pow) pass(id string) string {
	return visitorB64.EncodeToString(p.mac("pass", id)[:visitorTagLen])
}

// passed reports whether value is visitor id's pass.
func (p *pow) passed(id, value string) bool {
	return len(value) == 22 && hmac.Equal([]byte(value), []byte(p.pass(id)))
}

// challenge returns a fresh challenge for visitor id, expiring
// PoWChallengeTTL after now.
func (p *pow) challenge(id string, now time.Time) *problem.PoWChallenge {
	var raw [12]byte
	_, _ = rand.Read(raw[:]) // never fails (crypto/rand, Go ≥ 1.24)
	maxN := int64(1) << p.bits
	n, _ := rand.Int(rand.Reader, big.NewInt(maxN+1))
	salt := hex.EncodeToString(raw[:]) + "?expires=" + strconv.FormatInt(now.Add(PoWChallengeTTL).Unix(), 10) +
		"&v=" + p.bind(id) + "&"
	ch := altchaChallenge(salt, n.Int64())
	return &problem.PoWChallenge{Algorithm: PoWAlgorithm, Challenge: ch, MaxNumber: maxN, Salt: salt,
		Signature: hex.EncodeToString(altchaSign(p.key, ch))}
}

// verify checks a solution (an ALTCHA payload) for visitor id at now.
func (p *pow) verify(payload, id string, now time.Time) error {
	params, err := verifyALTCHA(p.key, payload)
	if err != nil {
		return err
	}
	exp, err := strconv.ParseInt(params.Get("expires"), 10, 64)
	if err != nil {
		return errPoWMalformed
	}
	if now.Unix() > exp {
		return errPoWExpired
	}
	if !hmac.Equal([]byte(params.Get("v")), []byte(p.bind(id))) {
		return errPoWVisitor
	}
	return nil
}

// Why a solution is refused (the pow_required detail).
var (
	errPoWMalformed = errors.New("the solution is not an ALTCHA payload of a flashgate challenge")
	errPoWWrong     = errors.New("the solution does not solve its challenge, or the challenge was not signed by this server")
	errPoWExpired   = errors.New("the challenge has expired")
	errPoWVisitor   = errors.New("the challenge was issued to another visitor")
)

// altchaPayload is the JSON of an ALTCHA solution; members the widget adds
// (took, …) are ignored.
type altchaPayload struct {
	Algorithm string          `json:"algorithm"`
	Challenge string          `json:"challenge"`
	Number    json.RawMessage `json:"number"` // a JSON integer, never a string
	Salt      string          `json:"salt"`
	Signature string          `json:"signature"`
}

// altchaChallenge is hex(SHA-256(salt + decimal n)).
func altchaChallenge(salt string, n int64) string {
	h := sha256.New()
	h.Write([]byte(salt))
	h.Write(strconv.AppendInt(nil, n, 10))
	return hex.EncodeToString(h.Sum(nil))
}

// altchaSign is HMAC-SHA256(key, challenge).
func altchaSign(key []byte, challenge string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(challenge))
	return m.Sum(nil)
}

// verifyALTCHA checks an ALTCHA payload (base64 of its JSON; standard
// alphabet as btoa writes it, padding optional) signed with key, as
// ALTCHA's verifySolution does: algorithm SHA-256, challenge ==
// hex(SHA-256(salt + number)), signature == hex(HMAC-SHA256(key,
// challenge)). It returns the salt's parameters (after "?"). The salt must
// end with "&", flashgate's (and ALTCHA's current libraries') terminator:
// without it, digits could move between the salt's last parameter and the
// number with the challenge unchanged (e.g. a later expires). It does not
// look at the parameters: the caller checks expires and its own.
// Errors: errPoWMalformed, errPoWWrong.
func verifyALTCHA(key []byte, payload string) (url.Values, error) {
	if len(payload) > maxPoWPayload {
		return nil, errPoWMalformed
	}
	raw, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		if raw, err = base64.RawStdEncoding.DecodeString(payload); err != nil {
			return nil, errPoWMalformed
		}
	}
	var pl altchaPayload
	if json.Unmarshal(raw, &pl) != nil || pl.Algorithm != PoWAlgorithm || len(pl.Challenge) != 2*sha256.Size ||
		len(pl.Signature) != 2*sha256.Size {
		return nil, errPoWMalformed
	}
	n, err := strconv.ParseInt(string(pl.Number), 10, 64)
	if err != nil || n < 0 {
		return nil, errPoWMalformed
	}
	q, ok := strings.CutSuffix(pl.Salt, "&")
	_, q, hasParams := strings.Cut(q, "?")
	if !ok || !hasParams {
		return nil, errPoWMalformed
	}
	params, err := url.ParseQuery(q)
	if err != nil {
		return nil, errPoWMalformed
	}
	sig, err := hex.DecodeString(pl.Signature)
	if err != nil || !hmac.Equal([]byte(altchaChallenge(pl.Salt, n)), []byte(pl.Challenge)) ||
		!hmac.Equal(sig, altchaSign(key, pl.Challenge)) {
		return nil, errPoWWrong
	}
	return params, nil
}

// powGate lets the enter of user u through when PoW is off, when the
// visitor holds its pass, or when solution verifies (then it sets the
// pass); otherwise it returns pow_required with a fresh challenge for u.
func (s *Server) powGate(c *fiber.Ctx, u string, solution *string) error {
	if s.pow == nil {
		return nil
	}
	id := strings.TrimPrefix(u, VisitorPrefix)
	if s.pow.passed(id, c.Cookies(PoWCookie)) {
		return nil
	}
	detail := "solve the challenge and send the enter again with the solution as \"pow\""
	if solution != nil {
		err := s.pow.verify(*solution, id, s.now())
		if err == nil {
			s.setVisitorCookie(c, PoWCookie, s.pow.pass(id))
			return nil
		}
		detail = err.Error() + ": " + detail
	}
	p := problemFor(problem.PoWRequired, detail)
	p.Challenge = s.pow.challenge(id, s.now())
	return p
}

// powPassed reports whether the request's visitor needs no proof of work
// to enter (PoW off, or it holds its pass).
func (s *Server) powPassed(c *fiber.Ctx, u string) bool {
	return s.pow == nil || s.pow.passed(strings.TrimPrefix(u, VisitorPrefix), c.Cookies(PoWCookie))
}

// GET /v1/challenge: a challenge for the request's visitor (the ALTCHA
// widget's challengeurl); 404 unknown_route when PoW is off.
func (s *Server) powChallenge(c *fiber.Ctx) error {
	if s.pow == nil {
		return problemFor(problem.UnknownRoute, "proof of work is off (FLASHGATE_ENTER_POW)")
	}
	u := s.visitor(c)
	return c.JSON(s.pow.challenge(strings.TrimPrefix(u, VisitorPrefix), s.now()))
}

// validatePoW checks EnterPoW: 0 … MaxEnterPoW, and only in visitor mode.
func (o Options) validatePoW() error {
	if o.EnterPoW < 0 || o.EnterPoW > MaxEnterPoW {
		return fmt.Errorf("server: Options.EnterPoW must be 0 (off) … %d bits, got %d", MaxEnterPoW, o.EnterPoW)
	}
	if o.EnterPoW > 0 && o.Identity != IdentityVisitor {
		return fmt.Errorf("server: Options.EnterPoW needs Identity %q (a header-mode user is authenticated by the gateway)", IdentityVisitor)
	}
	return nil
}
