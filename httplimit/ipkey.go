package httplimit

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/keyrate/keyrate/internal/clientkey"
	"github.com/keyrate/keyrate/internal/isnil"
)

// ipKey is ByIP's configuration and its key function.
type ipKey struct {
	trusted []netip.Prefix // unmapped and masked
	header  string         // canonical name of the one forwarding header read
	v6bits  int            // IPv6 grouping prefix length
}

// key returns r's client key: see ByIP.
func (k *ipKey) key(r *http.Request) (string, error) {
	addr, raw, err := k.client(r)
	if err != nil {
		return "", err
	}
	if !addr.IsValid() { // a Unix-socket peer
		return raw, nil
	}
	if addr.Is4() && raw != "" {
		return raw, nil // already canonical text: no allocation
	}
	return clientkey.FromAddr(addr, k.v6bits), nil
}

// client returns r's client address, unmapped and without a zone, and, if
// it is IPv4 and was written canonically in the request, that text. For a
// request that came over a Unix socket it returns the zero Addr and the
// socket's key, whatever RemoteAddr says: a Unix peer names its own
// address (it may bind its socket to a path such as "198.51.100.7:1"), so
// reading that as an IP would let it pick its key, and a trusted one, its
// forwarding header. See ByIP for the walk through the forwarding header.
func (k *ipKey) client(r *http.Request) (netip.Addr, string, error) {
	if key, ok := unixKey(r); ok {
		return netip.Addr{}, key, nil
	}
	peer, raw, ok := parseHostPort(r.RemoteAddr)
	if !ok {
		return netip.Addr{}, "", fmt.Errorf("%w: remote address %q is not an IP address", ErrBadAddress, r.RemoteAddr)
	}
	if !k.isTrusted(peer) {
		return peer, raw, nil
	}
	forwarded := k.header == "Forwarded"
	lines := r.Header[k.header]
	from := "" // the header line raw was read from, if any
	for i := len(lines) - 1; i >= 0; i-- {
		rest := lines[i]
		for {
			comma := lastComma(rest, forwarded)
			if elem := trimOWS(rest[comma+1:]); elem != "" {
				var ok bool
				if forwarded {
					peer, raw, ok = parseForwardedFor(elem)
				} else {
					peer, raw, ok = parseHostPort(elem)
				}
				if !ok {
					return netip.Addr{}, "", fmt.Errorf("%w: %s entry %q from a trusted proxy is not an IP address", ErrBadAddress, k.header, elem)
				}
				from = lines[i]
				if !k.isTrusted(peer) {
					return peer, unpinned(raw, from), nil
				}
			}
			if comma < 0 {
				break
			}
			rest = rest[:comma]
		}
	}
	return peer, unpinned(raw, from), nil // every hop is trusted: the left-most
}

// pinLimit is the longest header line a key may share its bytes with
// (see unpinned): a typical forwarding header, a few addresses long.
const pinLimit = 128

// unpinned returns raw, text read from the header line line, or, if the
// line is longer than pinLimit, a copy of it: a key that shares a line's
// bytes keeps the whole line alive for as long as a store holds the key
// (mutexbucket keeps its keys as strings), and a client may put up to
// http.Server.MaxHeaderBytes before its address.
func unpinned(raw, line string) string {
	if len(line) > pinLimit {
		return strings.Clone(raw)
	}
	return raw
}

// unixKey returns the key of a request that came over a Unix socket,
// "unix:" and the socket's name, and false for any other request.
func unixKey(r *http.Request) (string, bool) {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return "", false
	}
	if _, tcp := local.(*net.TCPAddr); tcp || isnil.Is(local) {
		// TCP, the common case, without reflection; and a nil address
		// (a harness's or a middleware's), whose Network may panic, as
		// a nil *net.UnixAddr's does.
		return "", false
	}
	switch local.Network() {
	case "unix", "unixpacket":
		return "unix:" + local.String(), true
	}
	return "", false
}

// isTrusted reports whether a is in a trusted proxy range.
func (k *ipKey) isTrusted(a netip.Addr) bool {
	for _, p := range k.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// lastComma returns the index of the last comma in s that separates list
// elements, or -1. With quoted set, commas inside double quotes do not
// count. The scan runs from the right, so that well-formed elements that
// proxies appended are split correctly whatever a client put before them.
func lastComma(s string, quoted bool) int {
	in := false
	for i := len(s) - 1; i >= 0; i-- {
		switch s[i] {
		case '"':
			if quoted {
				in = !in
			}
		case ',':
			if !in {
				return i
			}
		}
	}
	return -1
}

// trimOWS trims HTTP optional whitespace (spaces and tabs) from s.
func trimOWS(s string) string {
	return strings.Trim(s, " \t")
}

// parseForwardedFor returns the address in the for= parameter of one
// Forwarded element (RFC 7239): a token or a quoted string holding an IPv4
// address or a bracketed IPv6 address, either with an optional port.
func parseForwardedFor(elem string) (netip.Addr, string, bool) {
	for elem != "" {
		pair := elem
		if i := strings.IndexByte(elem, ';'); i >= 0 {
			pair, elem = elem[:i], elem[i+1:]
		} else {
			elem = ""
		}
		name, value, ok := strings.Cut(trimOWS(pair), "=")
		if !ok || !strings.EqualFold(name, "for") {
			continue
		}
		if strings.HasPrefix(value, `"`) {
			if len(value) < 2 || !strings.HasSuffix(value, `"`) {
				return netip.Addr{}, "", false
			}
			value = value[1 : len(value)-1]
			if strings.ContainsAny(value, `"\`) {
				return netip.Addr{}, "", false
			}
		}
		return parseHostPort(value)
	}
	return netip.Addr{}, "", false
}

// parseHostPort parses an IP address with an optional port: "192.0.2.1",
// "192.0.2.1:80", "2001:db8::1", "[2001:db8::1]" or "[2001:db8::1]:80". It
// returns the address unmapped and without a zone and, when the text was a
// plain IPv4 address (which netip only accepts in canonical form), that
// text.
func parseHostPort(s string) (netip.Addr, string, bool) {
	if a, n, ok := parseIPv4(s); ok && (n == len(s) || validPort(s[n:], false)) {
		return a, s[:n], true // the common case, "192.0.2.1:80", read in one pass
	}
	host := s
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 || !validPort(s[end+1:], true) {
			return netip.Addr{}, "", false
		}
		host = s[1:end]
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() {
			return netip.Addr{}, "", false
		}
		return a.WithZone("").Unmap(), "", true
	}
	i := strings.IndexByte(s, ':')
	if i < 0 || strings.IndexByte(s[i+1:], ':') >= 0 {
		// No colon (IPv4) or several (IPv6): no port.
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Addr{}, "", false
		}
		if a.Is4() {
			return a, s, true
		}
		return a.WithZone("").Unmap(), "", true
	}
	// One colon: IPv4 and a port. (A bare IPv6 address cannot carry one.)
	host = s[:i]
	if !validPort(s[i:], false) {
		return netip.Addr{}, "", false
	}
	a, err := netip.ParseAddr(host)
	if err != nil || !a.Is4() {
		return netip.Addr{}, "", false
	}
	return a, host, true
}

// parseIPv4 parses an IPv4 address in the dotted-decimal form
// netip.ParseAddr accepts (four decimal fields of 0 to 255, without
// leading zeros) at the start of s, and returns it and the length of its
// text. It is netip's answer for such text (FuzzParseHostPort checks
// parseHostPort against one built on netip alone) at a fraction of the
// cost, which matters on the path of every request.
func parseIPv4(s string) (a netip.Addr, n int, ok bool) {
	var ip [4]byte
	for f := range ip {
		if f > 0 {
			if n >= len(s) || s[n] != '.' {
				return netip.Addr{}, 0, false
			}
			n++
		}
		if n >= len(s) || s[n]-'0' > 9 {
			return netip.Addr{}, 0, false
		}
		v := uint(s[n] - '0')
		n++
		if v != 0 { // a field starting with 0 is 0 alone
			for end := n + 2; n < end && n < len(s) && s[n]-'0' <= 9; n++ {
				v = v*10 + uint(s[n]-'0')
			}
			if v > 255 {
				return netip.Addr{}, 0, false
			}
		}
		ip[f] = byte(v)
	}
	return netip.AddrFrom4(ip), n, true
}

// validPort reports whether s is ":" followed by 1 to 5 digits, or, if
// optional, empty.
func validPort(s string, optional bool) bool {
	if s == "" {
		return optional
	}
	if s[0] != ':' || len(s) < 2 || len(s) > 6 {
		return false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
