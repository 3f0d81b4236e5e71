package server

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/verifier"
)

// Identity modes (Options.Identity).
const (
	// IdentityHeader trusts the user id in Options.UserHeader, set by the
	// platform's gateway (the default).
	IdentityHeader = "header"
	// IdentityVisitor identifies browsers by a signed visitor cookie
	// (VisitorCookie) that the server sets on first contact; the user
	// header is ignored.
	IdentityVisitor = "visitor"
)

// Browser cookies (visitor mode).
const (
	// VisitorCookie holds a visitor's id and its MAC: base64url(16 random
	// bytes) "." base64url(16-byte truncated HMAC-SHA256 under
	// Options.VisitorKey). Its name when the cookies are not Secure
	// (Options.InsecureCookies) or Options.CookieDomain is set; otherwise
	// the cookie is VisitorHostCookie, and a VisitorCookie is never read: a
	// sibling subdomain or a plain-http page can set one, and adopting it
	// would let whoever planted it share the visitor's identity (issue 31).
	VisitorCookie = "flashgate_visitor"
	// VisitorHostCookie is the visitor cookie's name when it is Secure and
	// no Options.CookieDomain is set: the __Host- prefix makes browsers
	// refuse it unless Secure, Path=/ and without Domain, so neither a
	// sibling subdomain nor a plain-http page can set (fixate) it.
	VisitorHostCookie = "__Host-" + VisitorCookie
	// AdmissionCookie receives the admission token on a successful exchange;
	// it is the cookie verifier.Middleware reads.
	AdmissionCookie = verifier.DefaultCookie
	// VisitorMaxAge is the lifetime of the visitor cookie.
	VisitorMaxAge = 30 * 24 * time.Hour
	// MinVisitorKey is the shortest Options.VisitorKey, in bytes.
	MinVisitorKey = 32
	// VisitorPrefix starts every visitor's user id: "v_" + the cookie's id.
	VisitorPrefix = "v_"
)

const (
	visitorIDLen  = 16 // random bytes of a visitor id (128 bits)
	visitorTagLen = 16 // bytes of the truncated HMAC-SHA256 tag
	// visitorCookieLen is the exact length of a well-formed cookie value.
	visitorCookieLen = 2*22 + 1
	visitorLabel     = "flashgate visitor id v1\x00"
)

// visitorB64 is strict: the 4 unused bits of the last character must be
// zero, so that one id has exactly one spelling.
var visitorB64 = base64.RawURLEncoding.Strict()

// visitors mints and checks visitor cookies.
type visitors struct {
	key    []byte
	secure bool   // Secure attribute (off only with Options.InsecureCookies)
	domain string // Domain of the admission cookie ("" = host-only)
	name   string // the visitor cookie's name (visitorCookieName)
}

// visitorCookieName is the visitor cookie's name: VisitorHostCookie when it
// is Secure and no cookie domain is set, else VisitorCookie.
func visitorCookieName(secure bool, domain string) string {
	if secure && domain == "" {
		return VisitorHostCookie
	}
	return VisitorCookie
}

// fromRequest returns the id of the request's valid visitor cookie, of the
// current name only (v.name).
func (v *visitors) fromRequest(c *fiber.Ctx) (id string, ok bool) {
	// check keeps nothing of the value (the id is re-encoded): no copy.
	return v.check(c.Cookies(v.name))
}

func (v *visitors) tag(id []byte) []byte {
	m := hmac.New(sha256.New, v.key)
	m.Write([]byte(visitorLabel))
	m.Write(id)
	return m.Sum(nil)[:visitorTagLen]
}

// mint returns a fresh visitor id (base64url) and its cookie value.
func (v *visitors) mint() (id, value string) {
	raw := make([]byte, visitorIDLen)
	_, _ = rand.Read(raw) // never fails (crypto/rand, Go ≥ 1.24)
	id = visitorB64.EncodeToString(raw)
	return id, id + "." + visitorB64.EncodeToString(v.tag(raw))
}

// check returns the id of a well-formed cookie value whose tag verifies.
// Anything else — absent, oversized, wrong length, bad base64, bad MAC — is
// not an identity (ok false) and never an error.
func (v *visitors) check(value string) (id string, ok bool) {
	if len(value) != visitorCookieLen || value[22] != '.' {
		return "", false
	}
	raw, err := visitorB64.DecodeString(value[:22])
	if err != nil || len(raw) != visitorIDLen {
		return "", false
	}
	tag, err := visitorB64.DecodeString(value[23:])
	if err != nil || len(tag) != visitorTagLen || !hmac.Equal(tag, v.tag(raw)) {
		return "", false
	}
	// Re-encoded: a fresh string, never fiber's buffer.
	return visitorB64.EncodeToString(raw), true
}

// cookie returns the request cookie name, copied.
func cookie(c *fiber.Ctx, name string) string { return strings.Clone(c.Cookies(name)) }

// visitor returns the user id of the request's visitor: "v_" + the id of a
// valid visitor cookie, or of a fresh one, which it sets on the response.
func (s *Server) visitor(c *fiber.Ctx) string {
	id, ok := s.visitors.fromRequest(c)
	if !ok {
		var value string
		id, value = s.visitors.mint()
		s.setVisitorCookie(c, s.visitors.name, value)
	}
	return VisitorPrefix + id
}

// setVisitorCookie sets a cookie of the visitor's (VisitorCookie,
// PoWCookie): Path=/, VisitorMaxAge, HttpOnly, SameSite=Lax, Secure unless
// Options.InsecureCookies, host-only.
func (s *Server) setVisitorCookie(c *fiber.Ctx, name, value string) {
	c.Cookie(&fiber.Cookie{Name: name, Value: value, Path: "/",
		MaxAge: int(VisitorMaxAge / time.Second), Secure: s.visitors.secure, HTTPOnly: true,
		SameSite: fiber.CookieSameSiteLaxMode})
}

// limitUser is the key of the per-user enter limit, "" to skip it: the
// valid user header, or in visitor mode the id of a valid visitor cookie
// (a request without one gets a fresh id, whose count would be 1).
func (s *Server) limitUser(c *fiber.Ctx) string {
	if s.visitors == nil {
		if u := c.Get(s.userHdr); issuer.ValidID(u) {
			return u
		}
		return ""
	}
	if id, ok := s.visitors.fromRequest(c); ok {
		return VisitorPrefix + id
	}
	return ""
}

// trustedUser is the user header where it is trusted (header mode), else "".
func (s *Server) trustedUser(c *fiber.Ctx) string {
	if s.visitors != nil {
		return ""
	}
	return header(c, s.userHdr)
}

// setAdmissionCookie hands the admission token to the browser (visitor
// mode): HttpOnly, Secure, SameSite=Lax, Path=/, Domain CookieDomain, for
// the token's remaining lifetime in whole seconds (none if it has lapsed).
func (s *Server) setAdmissionCookie(c *fiber.Ctx, token string, exp time.Time) {
	secs := int(exp.Sub(s.now()) / time.Second)
	if secs < 1 {
		return
	}
	c.Cookie(&fiber.Cookie{Name: AdmissionCookie, Value: token, Path: "/", Domain: s.visitors.domain,
		MaxAge: secs, Secure: s.visitors.secure, HTTPOnly: true, SameSite: fiber.CookieSameSiteLaxMode})
}

// validateIdentity checks Identity, VisitorKey and CookieDomain.
func (o Options) validateIdentity() error {
	switch o.Identity {
	case "", IdentityHeader:
	case IdentityVisitor:
		if len(o.VisitorKey) < MinVisitorKey {
			return fmt.Errorf("server: Options.VisitorKey must be at least %d bytes in visitor mode, got %d", MinVisitorKey, len(o.VisitorKey))
		}
	default:
		return fmt.Errorf("server: Options.Identity must be %q or %q, got %q", IdentityHeader, IdentityVisitor, o.Identity)
	}
	if strings.ContainsFunc(o.CookieDomain, func(r rune) bool {
		return r <= ' ' || r >= 0x7f || strings.ContainsRune(`;,"\`, r)
	}) {
		return fmt.Errorf("server: Options.CookieDomain %q is not a domain", o.CookieDomain)
	}
	return nil
}
