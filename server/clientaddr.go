package server

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// Client addresses.
//
// Every per-address limit (enter, auto rooms, admin failures) and the
// access and audit logs take the client address from clientAddr, the one
// place it is derived:
//
//   - without Options.ProxyHeader, or when the TCP peer is not one of
//     Options.TrustedProxies, it is the peer's address;
//   - otherwise the header's entries (every line of it, in order; a list as
//     X-Forwarded-For and Forwarded hold, or a single address as X-Real-IP
//     and CF-Connecting-IP hold) are walked from the right, skipping the
//     trusted proxies: the first entry that is not one is the client. The
//     left part of the list is what the client sent and is never believed.
//     When every entry is a trusted proxy, the leftmost is the client;
//   - an entry the walk reaches that names no address — not an IP address
//     (with an optional port), RFC 7239's "unknown", an obfuscated
//     identifier ("_hidden"), a Forwarded element without for= — ends the
//     walk, and so does an absent or empty header: the client address is
//     then the peer's (the trusted proxy's), so those clients share the
//     proxy's budget. Nothing is refused for a malformed header: only a
//     trusted proxy can put such an entry where the walk reaches it.
//
// Limits are keyed on the address's prefix (addrKey): an IPv4 address (an
// IPv4-mapped IPv6 one too) by its /AddressPrefixV4 (default 32), an IPv6
// one by its /AddressPrefixV6 (default 64, what one subscriber gets).

// Defaults of Options.AddressPrefixV4 and AddressPrefixV6.
const (
	DefaultAddressPrefixV4 = 32
	DefaultAddressPrefixV6 = 64
)

// HeaderForwarded is RFC 7239's header; as Options.ProxyHeader its for=
// parameters are read (X-Forwarded-For and the others: the addresses).
const HeaderForwarded = "Forwarded"

// addrPolicy is how the client address is derived and keyed.
type addrPolicy struct {
	header    string // "" = the peer's address
	forwarded bool   // header is Forwarded (RFC 7239)
	trusted   []netip.Prefix
	v4, v6    int // prefix lengths of addrKey
}

// newAddrPolicy validates the proxy header, the trusted proxies and the
// prefix lengths (0: their defaults).
func newAddrPolicy(header string, proxies []string, v4, v6 int) (*addrPolicy, error) {
	p := &addrPolicy{header: strings.TrimSpace(header), v4: v4, v6: v6}
	if p.v4 == 0 {
		p.v4 = DefaultAddressPrefixV4
	}
	if p.v6 == 0 {
		p.v6 = DefaultAddressPrefixV6
	}
	if p.v4 < 1 || p.v4 > 32 || p.v6 < 1 || p.v6 > 128 {
		return nil, fmt.Errorf("server: Options.AddressPrefixV4 must be 1 … 32 and AddressPrefixV6 1 … 128 (0: %d, %d), got %d, %d",
			DefaultAddressPrefixV4, DefaultAddressPrefixV6, v4, v6)
	}
	if p.header == "" {
		return p, nil
	}
	p.forwarded = strings.EqualFold(p.header, HeaderForwarded)
	if len(proxies) == 0 {
		return nil, errors.New("server: Options.ProxyHeader needs Options.TrustedProxies " +
			"(the header is believed only from those peers)")
	}
	for _, s := range proxies {
		s = strings.TrimSpace(s)
		var pfx netip.Prefix
		var err error
		if strings.Contains(s, "/") {
			pfx, err = netip.ParsePrefix(s)
		} else {
			var a netip.Addr
			if a, err = netip.ParseAddr(s); err == nil && a.Zone() == "" {
				pfx = netip.PrefixFrom(a, a.BitLen())
			}
		}
		if err != nil || !pfx.IsValid() {
			return nil, fmt.Errorf("server: trusted proxy %q is not an IP address or CIDR range", s)
		}
		a := pfx.Addr()
		if a.Is4In6() && pfx.Bits() >= 96 {
			pfx = netip.PrefixFrom(a.Unmap(), pfx.Bits()-96)
		}
		p.trusted = append(p.trusted, pfx.Masked())
	}
	return p, nil
}

// trusts reports whether a is one of the trusted proxies.
func (p *addrPolicy) trusts(a netip.Addr) bool {
	for _, t := range p.trusted {
		if t.Contains(a) {
			return true
		}
	}
	return false
}

// client returns the client address of a request from peer whose
// p.header lines are values (section comment).
func (p *addrPolicy) client(peer netip.Addr, values [][]byte) netip.Addr {
	if p.header == "" || !p.trusts(peer) {
		return peer
	}
	client := peer
	for i := len(values) - 1; i >= 0; i-- {
		entries := splitOutsideQuotes(string(values[i]), ',')
		for j := len(entries) - 1; j >= 0; j-- {
			e := strings.TrimSpace(entries[j])
			if e == "" && len(entries) > 1 {
				continue // "a, , b": an empty list element (RFC 9110 §5.6.1)
			}
			if p.forwarded {
				e = forwardedFor(e)
			}
			a, ok := parseNode(e)
			if !ok {
				return peer
			}
			if !p.trusts(a) {
				return a
			}
			client = a
		}
	}
	return client
}

// key is the per-address limits' key of a: its masked prefix.
func (p *addrPolicy) key(a netip.Addr) string {
	bits := p.v6
	if a.Is4() {
		bits = p.v4
	}
	if bits == a.BitLen() {
		return a.String()
	}
	pfx, _ := a.Prefix(bits)
	return pfx.String()
}

// parseNode parses an X-Forwarded-For entry or a Forwarded for= node:
// an IPv4 address, an IPv6 address (bracketed or not), each with an
// optional port; an IPv4-mapped IPv6 address is its IPv4 address, a zone
// is dropped. "unknown", obfuscated identifiers and anything else: ok false.
func parseNode(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, perr := netip.ParseAddrPort(s)
		if perr != nil {
			if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' {
				return netip.Addr{}, false
			}
			if a, err = netip.ParseAddr(s[1 : len(s)-1]); err != nil || !a.Is6() {
				return netip.Addr{}, false
			}
		} else {
			a = ap.Addr()
		}
	}
	return a.WithZone("").Unmap(), true
}

// forwardedFor returns the for= value of one Forwarded element (RFC 7239
// §4: parameters separated by ";", names case-insensitive, values tokens
// or quoted strings), unquoted; "" when it has none.
func forwardedFor(element string) string {
	for _, pair := range splitOutsideQuotes(element, ';') {
		name, value, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(name), "for") {
			continue
		}
		value = strings.TrimSpace(value)
		if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
			var b strings.Builder
			for i := 1; i < len(value)-1; i++ {
				if value[i] == '\\' && i+1 < len(value)-1 {
					i++
				}
				b.WriteByte(value[i])
			}
			value = b.String()
		}
		return value
	}
	return ""
}

// splitOutsideQuotes splits s at every sep outside a quoted string
// (backslash escapes inside quotes honoured).
func splitOutsideQuotes(s string, sep byte) []string {
	if strings.IndexByte(s, '"') < 0 {
		return strings.Split(s, string(sep))
	}
	var out []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch {
		case quoted && s[i] == '\\':
			i++
		case s[i] == '"':
			quoted = !quoted
		case !quoted && s[i] == sep:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// peerAddr is the TCP peer's address (IPv4-mapped: its IPv4 address).
func peerAddr(c *fiber.Ctx) netip.Addr {
	a, _ := netip.AddrFromSlice(c.Context().RemoteIP())
	return a.Unmap()
}

// clientAddr is the request's client address (section comment): the one
// function every per-address limit and log line uses.
func (s *Server) clientAddr(c *fiber.Ctx) netip.Addr {
	var values [][]byte
	if s.addrs.header != "" {
		values = c.Request().Header.PeekAll(s.addrs.header)
	}
	return s.addrs.client(peerAddr(c), values)
}

// addrKey is the key of the request's client address in the per-address
// limits: its /AddressPrefixV4 or /AddressPrefixV6 prefix, a fresh string.
func (s *Server) addrKey(c *fiber.Ctx) string { return s.addrs.key(s.clientAddr(c)) }
