package server

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/realclientip/realclientip-go"
)

// Client addresses.
//
// Every per-address limit (enter, auto rooms, admin failures, event
// streams) and the access and audit logs take the client address from
// clientAddr, the one place it is derived:
//
//   - without Options.ProxyHeader, or when the TCP peer is not one of
//     Options.TrustedProxies, it is the peer's address;
//   - X-Forwarded-For and Forwarded are read with realclientip-go's
//     right-most trusted-range strategy: the header's entries (every line
//     of it, in order) are walked from the right, skipping the trusted
//     proxies, and the first entry that is not one is the client. Each
//     header by its own rules: X-Forwarded-For is a comma-separated list of
//     addresses with no quoting (a '"' is just a bad entry, it never hides
//     the commas after it), Forwarded (RFC 7239) a list of elements whose
//     for= parameter is the node, split at every comma too (no node holds
//     one, and a client's unterminated quoted string must not swallow the
//     element a proxy appended after it). The left part of the list is what the
//     client sent and is never believed, however it is spelled: a proxy
//     that appends (nginx $proxy_add_x_forwarded_for, HAProxy option
//     forwardfor) puts the address it saw to the right of it;
//   - any other header (X-Real-IP, CF-Connecting-IP) holds one address,
//     set by the proxy: its last line is read (realclientip-go's
//     single-IP-header strategy);
//   - from a trusted peer without the header (or with only blank lines of
//     it), the peer itself is the client: a proxy's own requests;
//   - otherwise there is no client address: the entry the walk reaches
//     names none (not an IP address, RFC 7239's "unknown", an obfuscated
//     identifier, an element without for=), or every entry is a trusted
//     proxy. Never the proxy's own address: such requests are keyed on one
//     shared key, "unknown", and logged as remote "unknown". Only a trusted
//     proxy writes where the walk reaches, so a client cannot choose it.
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
	header   string // canonical form; "" = the peer's address
	strategy realclientip.Strategy
	list     bool // header is X-Forwarded-For or Forwarded
	trusted  []netip.Prefix
	v4, v6   int // prefix lengths of addrKey
}

// UnknownAddr is the key and the logged remote of a request from a
// trusted proxy whose header names no client address (section comment).
const UnknownAddr = "unknown"

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
	p.header = http.CanonicalHeaderKey(p.header)
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
	var err error
	if p.list = p.header == HeaderForwarded || p.header == headerXFF; p.list {
		nets := make([]net.IPNet, len(p.trusted))
		for i, t := range p.trusted {
			nets[i] = net.IPNet{IP: t.Addr().AsSlice(), Mask: net.CIDRMask(t.Bits(), t.Addr().BitLen())}
		}
		p.strategy, err = realclientip.NewRightmostTrustedRangeStrategy(p.header, nets)
	} else {
		p.strategy, err = realclientip.NewSingleIPHeaderStrategy(p.header)
	}
	if err != nil {
		return nil, fmt.Errorf("server: Options.ProxyHeader %q: %w", header, err)
	}
	return p, nil
}

const headerXFF = "X-Forwarded-For"

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
// p.header lines are values (section comment); the zero Addr when there
// is none (UnknownAddr).
func (p *addrPolicy) client(peer netip.Addr, values [][]byte) netip.Addr {
	if p.header == "" || !p.trusts(peer) {
		return peer
	}
	lines := make([]string, 0, len(values))
	for _, v := range values {
		if p.list {
			v = dropEmptyElements(v)
		}
		if len(bytes.TrimSpace(v)) > 0 {
			lines = append(lines, string(v))
		}
	}
	if len(lines) == 0 {
		return peer // the proxy's own request
	}
	ip := p.strategy.ClientIP(http.Header{p.header: lines}, "")
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return netip.Addr{}
	}
	return a.WithZone("").Unmap()
}

// dropEmptyElements removes the empty elements of a comma-separated list
// ("a, , b": RFC 9110 §5.6.1 says a recipient ignores them); v itself when
// it has none.
func dropEmptyElements(v []byte) []byte {
	if !hasEmptyElement(v) {
		return v
	}
	parts := bytes.Split(v, []byte{','})
	out := parts[:0]
	for _, e := range parts {
		if len(bytes.TrimSpace(e)) > 0 {
			out = append(out, e)
		}
	}
	if len(out) == len(parts) {
		return v
	}
	return bytes.Join(out, []byte{','})
}

// hasEmptyElement reports whether the list v has an empty (or blank)
// element, without allocating.
func hasEmptyElement(v []byte) bool {
	blank := true
	for _, b := range v {
		switch b {
		case ',':
			if blank {
				return true
			}
			blank = true
		case ' ', '\t':
		default:
			blank = false
		}
	}
	return blank && bytes.IndexByte(v, ',') >= 0
}

// key is the per-address limits' key of a: its masked prefix.
func (p *addrPolicy) key(a netip.Addr) string {
	if !a.IsValid() {
		return UnknownAddr
	}
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

// remoteString is a client address as logged: UnknownAddr for none.
func remoteString(a netip.Addr) string {
	if !a.IsValid() {
		return UnknownAddr
	}
	return a.String()
}

// addrKey is the key of the request's client address in the per-address
// limits: its /AddressPrefixV4 or /AddressPrefixV6 prefix, a fresh string.
func (s *Server) addrKey(c *fiber.Ctx) string { return s.addrs.key(s.clientAddr(c)) }
