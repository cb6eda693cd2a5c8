// Package netguard guards outgoing HTTP requests made on behalf of a model
// or a job's inputs against server-side request forgery: it parses host
// allowlists ("api.example.com", "*.example.com", "10.0.0.5:8080") and
// checks URLs against them, and its dialer hook [Control] refuses
// connections to loopback, private, link-local and other non-public
// addresses, checked on the address actually connected to, whatever name
// it was resolved from (which defeats DNS rebinding).
//
// The http_get tool and the media loader share it.
package netguard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"
)

// RefusedNote ends the errors about refused addresses.
const RefusedNote = "loopback, private and link-local addresses are refused"

// hostsShown is how many allowed hosts [Hosts.String] names.
const hostsShown = 10

// An AddressError is the refusal of an address by [Control] or [CheckURL].
type AddressError struct {
	Addr netip.Addr
	Kind string // what [Refused] returned: "loopback", "private", …
}

func (e *AddressError) Error() string {
	return fmt.Sprintf("%s is %s address; %s", e.Addr, Article(e.Kind), RefusedNote)
}

// Control is a net.Dialer Control hook: it refuses a connection to an
// address [Refused] rules out, with an *[AddressError].
func Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("cannot check the address %q", address)
	}
	if kind := Refused(ap.Addr()); kind != "" {
		return &AddressError{Addr: ap.Addr(), Kind: kind}
	}
	return nil
}

// Address ranges refused besides those netip.Addr classifies.
var (
	sharedPrefix     = netip.MustParsePrefix("100.64.0.0/10")  // RFC 6598 (CGNAT)
	thisNetPrefix    = netip.MustParsePrefix("0.0.0.0/8")      // RFC 1122 "this network"
	reservedPrefix   = netip.MustParsePrefix("240.0.0.0/4")    // RFC 1112, with 255.255.255.255
	siteLocalPrefix  = netip.MustParsePrefix("fec0::/10")      // deprecated site-local
	nat64Prefix      = netip.MustParsePrefix("64:ff9b::/96")   // RFC 6052: IPv4 address in the last 32 bits
	nat64LocalPrefix = netip.MustParsePrefix("64:ff9b:1::/48") // RFC 8215, local use
	ipv4CompatPrefix = netip.MustParsePrefix("::/96")          // deprecated IPv4-compatible
)

// Refused returns the kind of address a is ("loopback", "private",
// "link-local", "unspecified", "shared (CGNAT)", "multicast", "reserved",
// "invalid") when it is not a public address, or "" when it is.
func Refused(a netip.Addr) string {
	a = a.Unmap()
	if nat64Prefix.Contains(a) {
		b := a.As16()
		if kind := Refused(netip.AddrFrom4([4]byte(b[12:]))); kind != "" {
			return kind
		}
	}
	switch {
	case !a.IsValid():
		return "invalid"
	case a.IsLoopback():
		return "loopback"
	case a.IsPrivate(), siteLocalPrefix.Contains(a), nat64LocalPrefix.Contains(a):
		return "private"
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast(), a.Zone() != "":
		return "link-local"
	case a.IsUnspecified(), thisNetPrefix.Contains(a):
		return "unspecified"
	case sharedPrefix.Contains(a):
		return "shared (CGNAT)"
	case a.IsMulticast():
		return "multicast"
	case reservedPrefix.Contains(a), ipv4CompatPrefix.Contains(a):
		return "reserved"
	}
	return ""
}

// Article prefixes kind with "a" or "an".
func Article(kind string) string {
	if kind != "" && strings.IndexByte("aeiou", kind[0]) >= 0 {
		return "an " + kind
	}
	return "a " + kind
}

// Hosts is a parsed host allowlist. The zero value allows no host.
type Hosts struct {
	patterns []pattern
	entries  []string
}

// pattern is one parsed allowlist entry.
type pattern struct {
	host     string     // lower case, no trailing dot; for a wildcard, the part after "*."
	wildcard bool       // "*.host"
	addr     netip.Addr // the address of an IP entry
	port     string     // "" for any port
}

// An EntryError is a malformed allowlist entry.
type EntryError struct {
	Index int    // the entry's index in the list
	Entry string // the entry as given
	Err   error  // what is wrong with it
}

func (e *EntryError) Error() string { return fmt.Sprintf("host %d %q: %v", e.Index, e.Entry, e.Err) }
func (e *EntryError) Unwrap() error { return e.Err }

// ParseHosts parses an allowlist. An entry is a host name
// ("api.example.com"), a pattern "*.example.com" matching every host name
// below example.com but not example.com itself, or an IP address
// ("127.0.0.1", "::1"); each may carry a port ("example.com:8080",
// "[::1]:8080"), without which any port matches. Names are compared
// case-insensitively; IP addresses match only IP entries. International
// names must be written in their "xn--" form. A malformed entry is an
// *[EntryError].
func ParseHosts(entries []string) (Hosts, error) {
	h := Hosts{entries: entries}
	for i, s := range entries {
		p, err := parsePattern(s)
		if err != nil {
			return Hosts{}, &EntryError{Index: i, Entry: s, Err: err}
		}
		h.patterns = append(h.patterns, p)
	}
	return h, nil
}

// Len returns how many entries h has.
func (h Hosts) Len() int { return len(h.patterns) }

// String names the allowed hosts for messages: the first ten of them,
// then how many more there are.
func (h Hosts) String() string {
	if len(h.entries) <= hostsShown {
		return strings.Join(h.entries, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(h.entries[:hostsShown], ", "), len(h.entries)-hostsShown)
}

// Allows reports whether a host (lower case, without a trailing dot) with
// the given port may be fetched. addr is the host's address when the host
// is an IP address, and the zero Addr otherwise.
func (h Hosts) Allows(host string, addr netip.Addr, port string) bool {
	for _, p := range h.patterns {
		switch {
		case p.port != "" && p.port != port:
		case p.addr.IsValid():
			if addr == p.addr {
				return true
			}
		case addr.IsValid():
			// An IP address matches IP entries only.
		case p.wildcard:
			if strings.HasSuffix(host, "."+p.host) {
				return true
			}
		case host == p.host:
			return true
		}
	}
	return false
}

// CheckURL reports why u may not be fetched under hosts, or nil: it must
// be an absolute http or https URL without user information, whose host
// hosts allows and, unless allowPrivate, is not an address [Refused] rules
// out. Host names are checked again, on the address connected to, by
// [Control]. Its errors are meant for a model or a user to read.
func CheckURL(u *url.URL, hosts Hosts, allowPrivate bool) error {
	switch {
	case u.Scheme == "":
		return errors.New(`not an absolute URL; give a full http or https URL, for example "https://example.com/"`)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("scheme %q is not allowed; only http and https URLs are", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return errors.New("the URL has no host")
	case u.User != nil:
		return errors.New("URLs with user information (user:password@) are not allowed")
	}
	raw := u.Hostname()
	for i := range len(raw) {
		if raw[i] >= utf8.RuneSelf {
			return fmt.Errorf("host %q is not ASCII; write international domain names in their xn-- form", raw)
		}
	}
	host := strings.ToLower(raw)
	addr, err := netip.ParseAddr(host)
	if err == nil {
		addr = addr.Unmap()
	} else {
		host = strings.TrimSuffix(host, ".")
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if !hosts.Allows(host, addr, port) {
		if hosts.Len() == 0 {
			return fmt.Errorf("host %q is not allowed: no host is allowed", u.Host)
		}
		return fmt.Errorf("host %q is not allowed; allowed hosts: %s", u.Host, hosts)
	}
	if addr.IsValid() && !allowPrivate {
		if kind := Refused(addr); kind != "" {
			return &AddressError{Addr: addr, Kind: kind}
		}
	}
	return nil
}

// parsePattern parses an allowlist entry.
func parsePattern(s string) (pattern, error) {
	var p pattern
	host := strings.ToLower(s)
	switch {
	case host == "":
		return p, errors.New("empty host")
	case strings.Contains(host, "://") || strings.ContainsAny(host, "/?#@ \t"):
		return p, errors.New(`want a host such as "example.com" or "*.example.com", optionally with a port, not a URL`)
	case strings.HasPrefix(host, "["):
		h, port, err := net.SplitHostPort(host)
		if err != nil {
			h, ok := strings.CutSuffix(host[1:], "]")
			if !ok {
				return p, errors.New("unclosed [")
			}
			host = h
		} else {
			host, p.port = h, port
		}
		if _, err := netip.ParseAddr(host); err != nil {
			return p, errors.New("only IPv6 addresses go in brackets")
		}
	case strings.Count(host, ":") == 1:
		h, port, err := net.SplitHostPort(host)
		if err != nil {
			return p, err
		}
		host, p.port = h, port
	}
	if p.port != "" || strings.HasSuffix(s, ":") {
		n, err := strconv.Atoi(p.port)
		if err != nil || n < 1 || n > 65535 || strings.TrimLeft(p.port, "0123456789") != "" {
			return p, fmt.Errorf("bad port %q", p.port)
		}
		p.port = strconv.Itoa(n)
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		if addr.Zone() != "" {
			return p, errors.New("IPv6 zones are not allowed")
		}
		p.addr = addr.Unmap()
		return p, nil
	}
	host, p.wildcard = strings.CutPrefix(host, "*.")
	host = strings.TrimSuffix(host, ".")
	if !validHostName(host) {
		if host == "*" || host == "" && p.wildcard {
			return p, errors.New(`a wildcard needs a domain after it, as in "*.example.com"`)
		}
		return p, errors.New("not a valid host name")
	}
	p.host = host
	return p, nil
}

// validHostName reports whether s is a host name of letters, digits, '-' and
// '_' in dot-separated labels of 1 to 63 bytes.
func validHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := range len(label) {
			c := label[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
