package httplimit

import (
	"strings"
	"testing"
	"unsafe"
)

// TestKeyDoesNotPinForwardingHeader: ByIP's key for a client found in a
// forwarding header must not share the bytes of the header line. The key
// of an IPv4 client is the address's text as the request wrote it (a
// substring, to save an allocation), which is fine for RemoteAddr, but a
// substring of a header line keeps the whole line alive for as long as
// the key is held: a store that keeps its keys as the strings it is given
// (a user's map; keyrate's stores copy a new key) would retain, per key, everything
// the client put before its address in the line (up to
// http.Server.MaxHeaderBytes, 1 MiB by default) - a memory amplification
// of about 60000 for one 16-byte key. Checked for each header, for the
// first untrusted entry and for the left-most when all are trusted.
func TestKeyDoesNotPinForwardingHeader(t *testing.T) {
	trust := TrustProxies("10.0.0.0/8")
	pad := strings.Repeat("198.51.100.77, ", 50_000) // 750 KB the client sent
	for _, c := range []struct {
		name, header, line, want string
		opts                     []IPOption
	}{
		{"X-Forwarded-For", "X-Forwarded-For", pad + "203.0.113.9, 10.0.0.2", "203.0.113.9", []IPOption{trust}},
		{"X-Forwarded-For/all trusted", "X-Forwarded-For", strings.Repeat("10.0.0.3, ", 50_000) + "10.0.0.2", "10.0.0.3", []IPOption{trust}},
		{"Forwarded", "Forwarded", strings.Repeat("for=198.51.100.77, ", 50_000) + `for="203.0.113.9:4711"`, "203.0.113.9", []IPOption{trust, ForwardedHeader("Forwarded")}},
		{"X-Real-IP", "X-Real-IP", pad + "203.0.113.9", "203.0.113.9", []IPOption{trust, ForwardedHeader("X-Real-IP")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := request("10.0.0.1:443", c.header, c.line)
			line := r.Header.Values(c.header)[0]
			key, err := ipKeyFunc(t, c.opts...)(r)
			if err != nil || key != c.want {
				t.Fatalf("key %q, %v; want %q", key, err, c.want)
			}
			k, l := uintptr(unsafe.Pointer(unsafe.StringData(key))), uintptr(unsafe.Pointer(unsafe.StringData(line)))
			if k >= l && k < l+uintptr(len(line)) {
				t.Fatalf("the key %q is a substring of the %d-byte header line: holding the key holds the line", key, len(line))
			}
		})
	}
}
