package server

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// MaxReturnURL is the longest return URL ReturnPolicy accepts, in bytes.
const MaxReturnURL = 2048

// parseOrigin returns the canonical form of a configured origin
// (scheme://host[:port]): scheme http or https, host lower-cased, default
// port dropped, IPv6 hosts in brackets. Anything more (a path, even "/",
// a query, a fragment, userinfo) or less is an error.
func parseOrigin(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errors.New("empty origin")
	}
	if s == "*" || strings.Contains(s, "*") {
		return "", errors.New("wildcards are not accepted: list every origin")
	}
	if !printableASCII(s) || strings.Contains(s, `\`) || strings.Contains(s, "%") {
		return "", errors.New("only printable ASCII, without backslashes or percent-encoding")
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", errors.New("the scheme must be http or https")
	}
	if u.Opaque != "" || u.Host == "" {
		return "", errors.New("want scheme://host[:port]")
	}
	if u.User != nil {
		return "", errors.New("userinfo is not part of an origin")
	}
	if u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.HasSuffix(s, "#") {
		return "", errors.New("an origin has no path, query or fragment (not even a trailing /)")
	}
	return canonicalOrigin(u)
}

// canonicalOrigin returns u's origin in canonical form: scheme (url.Parse
// has lower-cased it), lower-cased host, port unless it is the scheme's
// default.
func canonicalOrigin(u *url.URL) (string, error) {
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return "", errors.New("no host")
	}
	port := u.Port()
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("bad port %q", port)
		}
		port = strconv.Itoa(n)
	}
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return u.Scheme + "://" + host, nil
}

// printableASCII reports whether s holds only bytes 0x21 … 0x7e: no
// control characters, no whitespace, nothing a browser's URL parser would
// strip, fold or encode differently from Go's.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= 0x20 || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// originSet parses a list of configured origins into their canonical forms;
// what names the setting in errors.
func originSet(what string, origins []string) (map[string]struct{}, error) {
	set := make(map[string]struct{}, len(origins))
	for _, o := range origins {
		c, err := parseOrigin(o)
		if err != nil {
			return nil, fmt.Errorf("server: Options.%s: %q is not an origin (scheme://host[:port], no path): %v", what, o, err)
		}
		set[c] = struct{}{}
	}
	return set, nil
}

// ReturnPolicy decides where the waiting page may send a shopper back to
// (the worker's return parameter): only to an absolute http(s) URL on one
// of its origins. Build it with NewReturnPolicy; the zero value refuses
// everything.
type ReturnPolicy struct {
	origins map[string]struct{}
}

// NewReturnPolicy returns the policy that accepts return URLs on origins
// (scheme://host[:port] each, e.g. "https://shop.example"; host case and
// default ports do not matter). No origins: every URL is refused.
func NewReturnPolicy(origins []string) (*ReturnPolicy, error) {
	set, err := originSet("ReturnOrigins", origins)
	if err != nil {
		return nil, err
	}
	return &ReturnPolicy{origins: set}, nil
}

// Check returns the canonical form of raw (scheme and host lower-cased,
// default port dropped, path, query and fragment as given) and true when
// raw is safe to redirect to: at most MaxReturnURL bytes of printable
// ASCII without backslashes, an absolute http or https URL with a host and
// no userinfo, whose origin is one of the policy's. Everything else — a
// relative or scheme-relative URL ("//evil.example", "/\evil"), an opaque
// one ("https:evil", "https:%2F%2Fevil"), another scheme (javascript:,
// data:), "https://shop.example@evil.example", whitespace or control
// characters anywhere — is refused with "", false.
func (p *ReturnPolicy) Check(raw string) (string, bool) {
	if p == nil || len(p.origins) == 0 || len(raw) > MaxReturnURL || raw == "" {
		return "", false
	}
	if !printableASCII(raw) || strings.ContainsRune(raw, '\\') {
		return "", false
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return "", false
	}
	if u.Opaque != "" || u.User != nil || u.Host == "" {
		return "", false
	}
	// The authority as written: url.Parse accepts percent-encoded hosts
	// (RFC 6874 zones, non-ASCII names); a browser might decode them to
	// something else, so none are accepted.
	if strings.Contains(u.Host, "%") {
		return "", false
	}
	origin, err := canonicalOrigin(u)
	if err != nil {
		return "", false
	}
	if _, ok := p.origins[origin]; !ok {
		return "", false
	}
	out := origin + u.EscapedPath()
	if u.ForceQuery || u.RawQuery != "" {
		out += "?" + u.RawQuery
	}
	if u.Fragment != "" {
		out += "#" + u.EscapedFragment()
	}
	if len(out) > MaxReturnURL {
		return "", false
	}
	return out, true
}

// ReturnURL checks raw against the server's return policy
// (Options.ReturnOrigins; see ReturnPolicy.Check) and returns the URL to
// redirect to.
func (s *Server) ReturnURL(raw string) (string, bool) { return s.returns.Check(raw) }
