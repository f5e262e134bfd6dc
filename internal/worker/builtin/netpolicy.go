package builtin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// FailureAddressDenied is the failure type of a request the worker's
// address policy refuses: a host outside the allow-list, or an address in a
// denied range. It is not retryable.
const FailureAddressDenied = "AddressDenied"

// AddressPolicy decides which hosts and addresses the http executor may
// reach. It is the worker's, never the graph's.
//
// The allow-list holds host names ("api.example.com", or "*.example.com"
// for every name below example.com), IP addresses and networks in CIDR
// notation ("10.1.0.0/16", "fd00::/8"); a host name or an address may carry
// a port ("api.example.com:8443", "127.0.0.1:9000", "[::1]:9000"), which
// then is the only port allowed. With an empty list any host name may be
// requested, but only public addresses are dialled. With entries, a request
// must name an allowed host or dial an address in an allowed network.
//
// Whatever the host, the address actually dialled (after DNS, for every
// connection, on every redirect) must not be in a denied range — loopback,
// link-local (cloud metadata services live at 169.254.169.254 and
// fd00:ec2::254), private (RFC 1918, fc00::/7), shared (100.64.0.0/10),
// unspecified, multicast, broadcast or reserved — unless an allowed address
// or network contains it. Allowing a host name never opens a denied range:
// to reach a private service, allow its address or network as well. DNS
// answers are not trusted: a name that resolves to a denied address is
// refused when it is dialled.
type AddressPolicy struct {
	hosts []hostRule
	nets  []netRule
}

type hostRule struct {
	name string // exact, or ".suffix" for "*.suffix"
	port string // "": any
}

type netRule struct {
	pfx  netip.Prefix
	port string // "": any
}

// NewAddressPolicy parses an allow-list (see AddressPolicy). It reports
// every malformed entry at once.
func NewAddressPolicy(allow []string) (*AddressPolicy, error) {
	p := &AddressPolicy{}
	var errs []error
	for _, e := range allow {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if strings.Contains(e, "/") {
			pfx, err := netip.ParsePrefix(e)
			if err != nil {
				errs = append(errs, fmt.Errorf("allow %q: not a network in CIDR notation: %v", e, err))
				continue
			}
			p.nets = append(p.nets, netRule{pfx: pfx.Masked()})
			continue
		}
		host, port := e, ""
		if h, pt, err := net.SplitHostPort(e); err == nil {
			if n, err := strconv.ParseUint(pt, 10, 16); err != nil || n == 0 {
				errs = append(errs, fmt.Errorf("allow %q: bad port %q", e, pt))
				continue
			}
			host, port = h, pt
		}
		if a, err := netip.ParseAddr(host); err == nil {
			a = a.Unmap()
			p.nets = append(p.nets, netRule{pfx: netip.PrefixFrom(a, a.BitLen()), port: port})
			continue
		}
		h := strings.ToLower(strings.TrimSuffix(host, "."))
		if suffix, ok := strings.CutPrefix(h, "*."); ok {
			h = "." + suffix
		}
		if h == "" || h == "." || strings.ContainsAny(strings.TrimPrefix(h, "."), "*:/@ []") {
			errs = append(errs, fmt.Errorf("allow %q: want a host name, *.domain, an IP address (each with an optional :port) or a CIDR network", e))
			continue
		}
		p.hosts = append(p.hosts, hostRule{name: h, port: port})
	}
	return p, errors.Join(errs...)
}

// Restricted reports whether the policy lists entries (and so refuses hosts
// that are not among them).
func (p *AddressPolicy) Restricted() bool { return len(p.hosts) > 0 || len(p.nets) > 0 }

// hostAllowed reports whether the allow-list names host (a name) on port.
func (p *AddressPolicy) hostAllowed(host, port string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	for _, r := range p.hosts {
		if (r.name == h || (r.name[0] == '.' && strings.HasSuffix(h, r.name))) && (r.port == "" || r.port == port) {
			return true
		}
	}
	return false
}

func (p *AddressPolicy) netAllowed(a netip.Addr, port string) bool {
	for _, r := range p.nets {
		if r.pfx.Contains(a) && (r.port == "" || r.port == port) {
			return true
		}
	}
	return false
}

// names reports whether the allow-list names host on port: by name, or as
// an address inside an allowed network. Secrets go only to such hosts.
func (p *AddressPolicy) names(host, port string) bool {
	if p.hostAllowed(host, port) {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && p.netAllowed(a.Unmap().WithZone(""), port)
}

// checkHost is the check before any dial: a restricted policy refuses a
// host that is neither named nor an address in an allowed network (a name
// that might resolve into an allowed network is left to the dial).
func (p *AddressPolicy) checkHost(host, port string) error {
	if !p.Restricted() || p.names(host, port) {
		return nil
	}
	a, err := netip.ParseAddr(host)
	if err != nil && len(p.nets) > 0 {
		return nil
	}
	rule := "not in the worker's allow-list"
	if err == nil {
		if r := deniedRange(a.Unmap().WithZone("")); r != "" {
			rule = r + ", and not in the worker's allow-list"
		}
	}
	return &DeniedError{Host: net.JoinHostPort(host, port), Rule: rule}
}

// checkAddr is the check of an address about to be dialled for host.
func (p *AddressPolicy) checkAddr(host string, a netip.Addr, port string) error {
	// A prefix never contains an address with a zone (fe80::1%eth0).
	a = a.Unmap().WithZone("")
	if p.netAllowed(a, port) {
		return nil
	}
	if rule := deniedRange(a); rule != "" {
		return &DeniedError{Host: host, Addr: net.JoinHostPort(a.String(), port), Rule: rule}
	}
	if p.Restricted() && !p.hostAllowed(host, port) {
		return &DeniedError{Host: host, Addr: net.JoinHostPort(a.String(), port), Rule: "not in the worker's allow-list"}
	}
	return nil
}

// DeniedError is a request the address policy refused: the host asked for,
// the address it resolved to (when it got that far) and the rule.
type DeniedError struct {
	Host string
	Addr string
	Rule string
}

func (e *DeniedError) Error() string {
	switch {
	case e.Addr == "":
		return fmt.Sprintf("host %s is %s (allow it with -http-allow)", e.Host, e.Rule)
	case strings.HasPrefix(e.Addr, e.Host+":") || strings.HasPrefix(e.Addr, "["+e.Host+"]:"):
		return fmt.Sprintf("address %s is %s: denied by the worker's address policy (allow it with -http-allow)", e.Addr, e.Rule)
	}
	return fmt.Sprintf("host %s resolves to %s, which is %s: denied by the worker's address policy (allow it with -http-allow)", e.Host, e.Addr, e.Rule)
}

// deniedRanges are refused unless an allowed network contains them; each
// with the rule an error names.
var deniedRanges = []struct {
	pfx  netip.Prefix
	rule string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified (0.0.0.0/8)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback (127.0.0.0/8)"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private (10.0.0.0/8)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private (172.16.0.0/12)"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private (192.168.0.0/16)"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared address space (100.64.0.0/10)"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local, where cloud metadata lives (169.254.0.0/16)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "reserved (192.0.0.0/24)"},
	{netip.MustParsePrefix("198.18.0.0/15"), "reserved (198.18.0.0/15)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast (224.0.0.0/4)"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved or broadcast (240.0.0.0/4)"},
	{netip.MustParsePrefix("::/128"), "unspecified (::)"},
	{netip.MustParsePrefix("::1/128"), "loopback (::1)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local (fe80::/10)"},
	{netip.MustParsePrefix("fc00::/7"), "private, unique local (fc00::/7)"},
	{netip.MustParsePrefix("ff00::/8"), "multicast (ff00::/8)"},
	{netip.MustParsePrefix("64:ff9b::/96"), "NAT64, which embeds an IPv4 address (64:ff9b::/96)"},
	{netip.MustParsePrefix("2002::/16"), "6to4, which embeds an IPv4 address (2002::/16)"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible (::/96)"},
}

// deniedRange names the denied range that holds a, or "".
func deniedRange(a netip.Addr) string {
	for _, r := range deniedRanges {
		if r.pfx.Contains(a) {
			return r.rule
		}
	}
	return ""
}

// Transport is an http.Transport whose every connection is checked against
// the policy: the host before resolving it, the resolved address before
// connecting (so DNS rebinding is caught). It uses no proxy, since through
// a proxy the address dialled would be the proxy's.
func (p *AddressPolicy) Transport() *http.Transport {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if err := p.checkHost(host, port); err != nil {
			return nil, err
		}
		dd := *d
		dd.Control = func(_, address string, _ syscall.RawConn) error {
			ip, port, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			a, err := netip.ParseAddr(ip)
			if err != nil {
				return fmt.Errorf("dialling %q: unparsable address %q", host, address)
			}
			return p.checkAddr(host, a, port)
		}
		return dd.DialContext(ctx, network, addr)
	}
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            dial,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           100,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
}
