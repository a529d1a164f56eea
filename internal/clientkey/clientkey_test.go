package clientkey

import (
	"net/netip"
	"testing"
)

func TestFromAddr(t *testing.T) {
	for _, tc := range []struct {
		addr string
		bits int
		want string
	}{
		{"192.0.2.1", 64, "192.0.2.1"},
		{"::ffff:192.0.2.1", 64, "192.0.2.1"},
		{"2001:db8:1:2:3:4:5:6", 64, "2001:db8:1:2::/64"},
		{"2001:db8:1:2:3:4:5:6", 48, "2001:db8:1::/48"},
		{"2001:db8:1:2:3:4:5:6", 128, "2001:db8:1:2:3:4:5:6"},
		{"2001:db8:1:2:3:4:5:6", 0, "2001:db8:1:2:3:4:5:6"},
		{"fe80::1%eth0", 64, "fe80::1"},
		{"::1", 64, "::/64"},
	} {
		if got := FromAddr(netip.MustParseAddr(tc.addr), tc.bits); got != tc.want {
			t.Errorf("FromAddr(%s, %d) = %q, want %q", tc.addr, tc.bits, got, tc.want)
		}
	}
}
