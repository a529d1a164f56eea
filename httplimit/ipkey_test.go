package httplimit

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

// ipKeyFunc builds ByIP's key function with opts, failing t on an option
// error.
func ipKeyFunc(t testing.TB, opts ...IPOption) func(*http.Request) (string, error) {
	t.Helper()
	var c config
	ByIP(opts...)(&c)
	if c.err != nil {
		t.Fatalf("ByIP: %v", c.err)
	}
	return c.key
}

// request returns a request from remote carrying the header lines in hdr
// (name, value, name, value...).
func request(remote string, hdr ...string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	return r
}

func TestByIP(t *testing.T) {
	trust := TrustProxies("10.0.0.0/8", "2001:db8:ffff::/48", "192.0.2.254")
	xff, fwd, real := "X-Forwarded-For", "Forwarded", "X-Real-IP"
	tests := []struct {
		name string
		opts []IPOption
		req  *http.Request
		want string // the key, or "error"
	}{
		// No proxies trusted: headers never read.
		{"plain IPv4", nil, request("198.51.100.7:1234"), "198.51.100.7"},
		{"spoofed XFF, nothing trusted", nil, request("198.51.100.7:1234", xff, "1.2.3.4"), "198.51.100.7"},
		{"spoofed XFF from a trusted range but none configured", nil, request("10.0.0.1:1234", xff, "1.2.3.4"), "10.0.0.1"},
		// Proxies trusted, but this peer is not one.
		{"spoofed XFF, untrusted peer", []IPOption{trust}, request("198.51.100.7:1234", xff, "1.2.3.4"), "198.51.100.7"},
		{"spoofed Forwarded, untrusted peer", []IPOption{trust, ForwardedHeader(fwd)}, request("198.51.100.7:1234", fwd, "for=1.2.3.4"), "198.51.100.7"},
		// Through trusted proxies.
		{"one trusted proxy", []IPOption{trust}, request("10.0.0.1:1234", xff, "203.0.113.9"), "203.0.113.9"},
		{"two trusted proxies", []IPOption{trust}, request("10.0.0.2:1234", xff, "203.0.113.9, 10.0.0.1"), "203.0.113.9"},
		{"two trusted proxies, client spoofs", []IPOption{trust}, request("10.0.0.2:1234", xff, "1.2.3.4, 203.0.113.9, 10.0.0.1"), "203.0.113.9"},
		{"client spoofs a trusted address", []IPOption{trust}, request("10.0.0.2:1234", xff, "10.9.9.9, 203.0.113.9,10.0.0.1"), "203.0.113.9"},
		{"client garbage left of its entry", []IPOption{trust}, request("10.0.0.2:1234", xff, `"garbage, ,[::1, 203.0.113.9`), "203.0.113.9"},
		{"header split over lines", []IPOption{trust}, request("10.0.0.2:1234", xff, "1.2.3.4", xff, "203.0.113.9, 10.0.0.1"), "203.0.113.9"},
		{"entry with port", []IPOption{trust}, request("10.0.0.2:1234", xff, "203.0.113.9:5555"), "203.0.113.9"},
		{"single trusted address", []IPOption{trust}, request("192.0.2.254:80", xff, "203.0.113.9"), "203.0.113.9"},
		{"neighbour of a trusted address", []IPOption{trust}, request("192.0.2.253:80", xff, "203.0.113.9"), "192.0.2.253"},
		{"every hop trusted", []IPOption{trust}, request("10.0.0.2:1234", xff, "10.0.0.7, 10.0.0.1"), "10.0.0.7"},
		{"trusted peer, no header", []IPOption{trust}, request("10.0.0.2:1234"), "10.0.0.2"},
		{"trusted peer, empty header", []IPOption{trust}, request("10.0.0.2:1234", xff, " , "), "10.0.0.2"},
		{"IPv6 client via IPv6 proxy", []IPOption{trust}, request("[2001:db8:ffff::1]:443", xff, "2001:db8:1:2:3:4:5:6"), "2001:db8:1:2::/64"},
		{"trusted proxy wrote garbage", []IPOption{trust}, request("10.0.0.2:1234", xff, "203.0.113.9, nonsense"), "error"},
		{"X-Forwarded-For ignored when Forwarded is chosen", []IPOption{trust, ForwardedHeader(fwd)}, request("10.0.0.2:1234", xff, "1.2.3.4"), "10.0.0.2"},
		{"Forwarded ignored when X-Forwarded-For is chosen", []IPOption{trust}, request("10.0.0.2:1234", fwd, "for=1.2.3.4"), "10.0.0.2"},
		// Forwarded (RFC 7239).
		{"Forwarded", []IPOption{trust, ForwardedHeader("forwarded")}, request("10.0.0.2:1234", fwd, `for=1.2.3.4, for=203.0.113.9;proto=https;by="[2001:db8:ffff::1]", For="10.0.0.1:80"`), "203.0.113.9"},
		{"Forwarded IPv6 with port", []IPOption{trust, ForwardedHeader(fwd)}, request("10.0.0.2:1234", fwd, `for="[2001:db8:cafe::17]:4711"`), "2001:db8:cafe::/64"},
		{"Forwarded comma in a quoted value", []IPOption{trust, ForwardedHeader(fwd)}, request("10.0.0.2:1234", fwd, `for=203.0.113.9;host="a,b"`), "203.0.113.9"},
		{"Forwarded unknown", []IPOption{trust, ForwardedHeader(fwd)}, request("10.0.0.2:1234", fwd, `for=unknown`), "error"},
		{"Forwarded obfuscated", []IPOption{trust, ForwardedHeader(fwd)}, request("10.0.0.2:1234", fwd, `for=_hidden`), "error"},
		{"Forwarded without for", []IPOption{trust, ForwardedHeader(fwd)}, request("10.0.0.2:1234", fwd, `proto=https`), "error"},
		{"Forwarded unterminated quote", []IPOption{trust, ForwardedHeader(fwd)}, request("10.0.0.2:1234", fwd, `for="203.0.113.9`), "error"},
		// X-Real-IP.
		{"X-Real-IP", []IPOption{trust, ForwardedHeader(real)}, request("10.0.0.2:1234", real, "203.0.113.9"), "203.0.113.9"},
		{"X-Real-IP untrusted peer", []IPOption{trust, ForwardedHeader(real)}, request("198.51.100.7:1", real, "203.0.113.9"), "198.51.100.7"},
		// IPv6 grouping and mapped addresses.
		{"IPv6 /64", nil, request("[2001:db8:1:2:3:4:5:6]:443"), "2001:db8:1:2::/64"},
		{"IPv6 same /64", nil, request("[2001:db8:1:2:ffff::1]:443"), "2001:db8:1:2::/64"},
		{"IPv6 /48", []IPOption{IPv6Prefix(48)}, request("[2001:db8:1:2:3:4:5:6]:443"), "2001:db8:1::/48"},
		{"IPv6 /128", []IPOption{IPv6Prefix(128)}, request("[2001:db8:1:2:3:4:5:6]:443"), "2001:db8:1:2:3:4:5:6"},
		{"IPv6 zone dropped", []IPOption{IPv6Prefix(128)}, request("[fe80::1%eth0]:443"), "fe80::1"},
		// Link-local addresses (fe80::/10) share no prefix a host owns:
		// each is its own key, whatever IPv6Prefix says.
		{"link-local", nil, request("[fe80::1%eth0]:443"), "fe80::1"},
		{"link-local neighbour", nil, request("[fe80::2%eth0]:443"), "fe80::2"},
		{"link-local EUI-64", nil, request("[fe80::21a:2bff:fe3c:4d5e]:443"), "fe80::21a:2bff:fe3c:4d5e"},
		{"link-local /10 end", []IPOption{IPv6Prefix(16)}, request("[febf:ffff::1]:443"), "febf:ffff::1"},
		{"site-local is not link-local", nil, request("[fec0::1]:443"), "fec0::/64"},
		{"link-local via a trusted proxy", []IPOption{trust}, request("10.0.0.2:1234", xff, "fe80::7"), "fe80::7"},
		{"IPv4-mapped IPv6", nil, request("[::ffff:192.0.2.1]:80"), "192.0.2.1"},
		{"IPv4-mapped trusted range", []IPOption{TrustProxies("::ffff:10.0.0.0/104")}, request("10.1.2.3:80", xff, "203.0.113.9"), "203.0.113.9"},
		{"remote without port", nil, request("198.51.100.7"), "198.51.100.7"},
		// Bad remote addresses.
		{"remote not an address", nil, request("@pipe"), "error"},
		{"remote empty", nil, request(""), "error"},
		{"remote with bad port", nil, request("198.51.100.7:http"), "error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, err := ipKeyFunc(t, tt.opts...)(tt.req)
			if tt.want == "error" {
				if !errors.Is(err, ErrBadAddress) {
					t.Errorf("key %q, error %v; want an error wrapping ErrBadAddress", key, err)
				}
				return
			}
			if err != nil || key != tt.want {
				t.Errorf("key %q, error %v; want %q", key, err, tt.want)
			}
		})
	}
}

// TestByIPNoAllocs checks the common case, an IPv4 client and no trusted
// proxies, costs no allocation.
func TestByIPNoAllocs(t *testing.T) {
	key := ipKeyFunc(t)
	r := request("198.51.100.7:1234", "X-Forwarded-For", "1.2.3.4")
	if n := testing.AllocsPerRun(100, func() { _, _ = key(r) }); n != 0 {
		t.Errorf("ByIP key: %v allocations per request, want 0", n)
	}
}

// FuzzClientIP feeds arbitrary remote addresses and forwarding headers to
// ByIP, for both header syntaxes. It checks that nothing panics, that an
// error is always ErrBadAddress, that a key is a canonical address or
// prefix, and that the headers of a peer that is not trusted are never
// read.
func FuzzClientIP(f *testing.F) {
	f.Add("10.0.0.2:1234", "203.0.113.9, 10.0.0.1", `for=203.0.113.9, for="10.0.0.1:80"`)
	f.Add("198.51.100.7:1", "1.2.3.4", "for=1.2.3.4")
	f.Add("[2001:db8:ffff::1]:443", "2001:db8::1, [::1]:80", `for="[2001:db8:cafe::17]:4711";proto=http`)
	f.Add("10.0.0.2:1", `"a,b", ,`, `for="a,b";by=x, for=unknown`)
	trust := TrustProxies("10.0.0.0/8", "2001:db8:ffff::/48")
	keys := map[string]func(*http.Request) (string, error){
		"X-Forwarded-For": ipKeyFunc(f, trust),
		"Forwarded":       ipKeyFunc(f, trust, ForwardedHeader("Forwarded")),
	}
	bare := ipKeyFunc(f)
	f.Fuzz(func(t *testing.T, remote, xff, fwd string) {
		r := request(remote)
		r.Header["X-Forwarded-For"] = []string{xff}
		r.Header["Forwarded"] = []string{fwd}
		peerKey, peerErr := bare(r)
		for header, key := range keys {
			got, err := key(r)
			if err != nil {
				if !errors.Is(err, ErrBadAddress) || got != "" {
					t.Fatalf("%s: key %q, error %v; want \"\" and ErrBadAddress", header, got, err)
				}
				continue
			}
			if p, perr := netip.ParsePrefix(got); perr == nil {
				if p.Bits() != 64 || !p.Addr().Is6() || p.Addr().IsLinkLocalUnicast() || p.Masked() != p || p.String() != got {
					t.Fatalf("%s: key %q is not a canonical IPv6 /64 outside fe80::/10", header, got)
				}
			} else if a, aerr := netip.ParseAddr(got); aerr != nil || !(a.Is4() || a.Is6() && a.IsLinkLocalUnicast() && a.Zone() == "") || a.String() != got {
				t.Fatalf("%s: key %q is neither a canonical IPv4 address, an IPv6 link-local one nor a /64", header, got)
			}
			if peerErr != nil {
				t.Fatalf("%s: key %q for remote %q, which alone is an error (%v)", header, got, remote, peerErr)
			}
			if peer, _, _ := parseHostPort(remote); !(&ipKey{trusted: mustTrusted()}).isTrusted(peer) && got != peerKey {
				t.Fatalf("%s: untrusted peer %q keyed %q, want its own key %q", header, remote, got, peerKey)
			}
			if strings.ContainsAny(got, " ,\"") {
				t.Fatalf("%s: key %q carries header syntax", header, got)
			}
		}
	})
}

// mustTrusted returns the prefixes FuzzClientIP trusts.
func mustTrusted() []netip.Prefix {
	return []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
}

// FuzzParseHostPort checks parseHostPort, whose IPv4 fast path parses
// by hand, against parseHostPortNetip, the same rules on netip alone.
func FuzzParseHostPort(f *testing.F) {
	for _, s := range []string{"0.0.0.0", "255.255.255.255:65535", "10.1.2.3:80", "01.2.3.4", "1.2.3.256:1",
		"1.2.3", "1.2.3.4.5", "1..2.3", ".1.2.3", "1.2.3.", "", "::1", "1.2.3.4%eth0", "1.2.3.4 ", "1000.2.3.4",
		"00.1.2.3", "1.2.3.4:", "1.2.3.4:123456", "1.2.3.4:1:2", "[::1]:80", "[1.2.3.4]:80", "1.2.3.40:x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, raw, ok := parseHostPort(s)
		wa, wraw, wok := parseHostPortNetip(s)
		if a != wa || raw != wraw || ok != wok {
			t.Fatalf("parseHostPort(%q) = %v, %q, %v; want %v, %q, %v", s, a, raw, ok, wa, wraw, wok)
		}
	})
}

// parseHostPortNetip is parseHostPort's rules with every address parsed
// by netip.ParseAddr: the reference FuzzParseHostPort checks it against.
func parseHostPortNetip(s string) (netip.Addr, string, bool) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 || !validPort(s[end+1:], true) {
			return netip.Addr{}, "", false
		}
		a, err := netip.ParseAddr(s[1:end])
		if err != nil || !a.Is6() {
			return netip.Addr{}, "", false
		}
		return a.WithZone("").Unmap(), "", true
	}
	host, port, found := strings.Cut(s, ":")
	if !found || strings.Contains(port, ":") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Addr{}, "", false
		}
		if a.Is4() {
			return a, s, true
		}
		return a.WithZone("").Unmap(), "", true
	}
	a, err := netip.ParseAddr(host)
	if err != nil || !a.Is4() || !validPort(":"+port, false) {
		return netip.Addr{}, "", false
	}
	return a, host, true
}
