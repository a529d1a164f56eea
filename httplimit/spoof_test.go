package httplimit

import (
	"fmt"
	"net/http"
	"net/netip"
	"testing"
)

// FuzzClientCannotChooseKey gives ByIP, behind one or two trusted
// proxies, a forwarding header whose left part is anything a client
// sends (unbalanced quotes, commas, escapes, "for=" of a trusted or any
// address, whole elements) and whose right part is what the proxies
// append: the client's real address (IPv4 or IPv6, with or without a
// port, quoted or not in Forwarded), then the first proxy's. The client's
// part either shares the proxies' line or is a line of its own. The key
// must be the real address's, whatever the client's part: a client never
// chooses its key, nor makes its request fail when its own address was
// appended after its claims.
func FuzzClientCannotChooseKey(f *testing.F) {
	f.Add(`for="6.6.6.6`, uint8(0), uint16(7))
	f.Add(`for=10.0.0.9, for="[2001:db8::1]`, uint8(1), uint16(300))
	f.Add(`"\", for=6.6.6.6;x="`, uint8(2), uint16(9))
	f.Add(`for="1.2.3.4\"`, uint8(3), uint16(65535))
	f.Add(`for="`, uint8(6), uint16(1))
	f.Add(`,,,"`, uint8(7), uint16(2))
	trust := TrustProxies("10.0.0.0/8", "2001:db8:ffff::/48")
	xff := ipKeyFunc(f, trust)
	fwd := ipKeyFunc(f, trust, ForwardedHeader("Forwarded"))
	want := ipKeyFunc(f) // the key of the real address as a peer
	f.Fuzz(func(t *testing.T, claim string, mode uint8, n uint16) {
		var real netip.Addr
		if mode&1 == 0 {
			real = netip.AddrFrom4([4]byte{203, 0, 113, byte(n)})
		} else {
			real = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 2, 0, 0, 0, 0, 0, 0, byte(n >> 8), byte(n)})
		}
		port := mode&2 != 0
		ownLine := mode&4 != 0
		text := real.String()
		if port {
			text = netip.AddrPortFrom(real, n).String()
		}
		fwdText := "for=" + text
		if real.Is6() || port {
			fwdText = fmt.Sprintf(`for="%s"`, netip.AddrPortFrom(real, n).String())
			if !port {
				fwdText = fmt.Sprintf(`for="[%s]"`, real)
			}
		}
		wantKey, err := want(request(netip.AddrPortFrom(real, 1).String()))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name, header, appended string
			key                    func(r *http.Request) (string, error)
		}{
			{"X-Forwarded-For", "X-Forwarded-For", text + ", 10.0.0.1", xff},
			{"Forwarded", "Forwarded", fwdText + ";proto=https, for=10.0.0.1;by=10.0.0.2", fwd},
		} {
			var r *http.Request
			if ownLine {
				r = request("10.0.0.2:443", c.header, claim, c.header, c.appended)
			} else {
				r = request("10.0.0.2:443", c.header, claim+", "+c.appended)
			}
			got, err := c.key(r)
			if err != nil || got != wantKey {
				t.Fatalf("%s: claim %q before %q (own line %v): key %q, %v; want %q", c.name, claim, c.appended, ownLine, got, err, wantKey)
			}
		}
	})
}
