package httplimit

import (
	"fmt"
	"testing"
)

// TestSameClientSameKey gives ByIP one client in every form it can
// arrive in: as the peer (RemoteAddr, with a port, IPv6 bracketed, with a
// zone), and through a trusted proxy in X-Forwarded-For, X-Real-IP and
// Forwarded (token, quoted, with a port, bracketed, IPv4-mapped, upper
// case hex, zero groups written out, surrounded by optional whitespace).
// Every form of one client must give one key, under each IPv6 prefix
// length; a different client in the same forms must give another (for
// IPv6, one outside a /64, inside a /48).
func TestSameClientSameKey(t *testing.T) {
	type forms struct{ peer, xff, fwd []string }
	v4 := func(a string) forms {
		return forms{
			peer: []string{a + ":1234", a + ":1", "[::ffff:" + a + "]:443"},
			xff:  []string{a, a + ":80", " \t" + a + "\t ", "::ffff:" + a, "[::ffff:" + a + "]:8080"},
			fwd:  []string{"for=" + a, `for="` + a + `"`, `for="` + a + `:80"`, `For="[::ffff:` + a + `]:1"`, "proto=https;for=" + a + ";by=x"},
		}
	}
	v6 := func(a, upper, long string) forms {
		return forms{
			peer: []string{"[" + a + "]:1234", "[" + upper + "]:1", "[" + long + "%eth0]:9"},
			xff:  []string{a, upper, long, "[" + a + "]:80", "[" + long + "]"},
			fwd:  []string{`for="[` + a + `]"`, `for="[` + upper + `]:4711"`, `FOR="[` + long + `]"`},
		}
	}
	clients := [][2]forms{
		{v4("203.0.113.9"), v4("203.0.113.10")},
		{v6("2001:db8:1:2::5", "2001:DB8:1:2::5", "2001:0db8:0001:0002:0000:0000:0000:0005"),
			v6("2001:db8:1:3::5", "2001:DB8:1:3::5", "2001:0db8:0001:0003:0000:0000:0000:0005")},
	}
	for _, bits := range []int{48, 64, 128} {
		trust := TrustProxies("10.0.0.0/8")
		keys := map[string]func(string, string) (string, error){
			"peer": func(_, v string) (string, error) { return ipKeyFunc(t, IPv6Prefix(bits))(request(v)) },
			"xff": func(_, v string) (string, error) {
				return ipKeyFunc(t, IPv6Prefix(bits), trust)(request("10.0.0.1:1", "X-Forwarded-For", v))
			},
			"real": func(_, v string) (string, error) {
				return ipKeyFunc(t, IPv6Prefix(bits), trust, ForwardedHeader("X-Real-IP"))(request("10.0.0.1:1", "X-Real-IP", v))
			},
			"fwd": func(_, v string) (string, error) {
				return ipKeyFunc(t, IPv6Prefix(bits), trust, ForwardedHeader("Forwarded"))(request("10.0.0.1:1", "Forwarded", v))
			},
		}
		for ci, pair := range clients {
			var seen [2]map[string]string // key → the form that gave it
			for side, f := range pair {
				seen[side] = map[string]string{}
				for _, c := range []struct {
					how  string
					vals []string
				}{{"peer", f.peer}, {"xff", f.xff}, {"real", f.xff}, {"fwd", f.fwd}} {
					for _, v := range c.vals {
						k, err := keys[c.how]("", v)
						if err != nil {
							t.Fatalf("/%d client %d.%d as %s %q: %v", bits, ci, side, c.how, v, err)
						}
						seen[side][k] = fmt.Sprintf("%s %q", c.how, v)
					}
				}
				if len(seen[side]) != 1 {
					t.Errorf("/%d client %d.%d has %d keys: %v", bits, ci, side, len(seen[side]), seen[side])
				}
			}
			if bits >= 64 || ci == 0 { // the two IPv6 clients differ in their 4th group: one /48
				for k := range seen[0] {
					if _, ok := seen[1][k]; ok {
						t.Errorf("/%d clients %d.0 and %d.1 share key %q", bits, ci, ci, k)
					}
				}
			}
		}
	}
}
