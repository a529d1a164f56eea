package httplimit

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
)

// sfItem is one parsed structured-field Item: a String or an Integer,
// and its parameters (Integers).
type sfItem struct {
	str    string
	num    int64
	isStr  bool
	params map[string]int64
}

// parseSFList parses s as an RFC 8941 List of Items whose bare items are
// Strings or Integers and whose parameters are Integers: the shapes
// RateLimit and RateLimit-Policy use. It is strict: anything else is an
// error.
func parseSFList(s string) ([]sfItem, error) {
	var items []sfItem
	for {
		it, rest, err := parseSFItem(s)
		if err != nil {
			return nil, err
		}
		items = append(items, it)
		if rest == "" {
			return items, nil
		}
		rest = strings.TrimLeft(rest, " \t")
		if !strings.HasPrefix(rest, ",") {
			return nil, fmt.Errorf("%q: expected a comma", rest)
		}
		s = strings.TrimLeft(rest[1:], " \t")
		if s == "" {
			return nil, errors.New("trailing comma")
		}
	}
}

func parseSFItem(s string) (sfItem, string, error) {
	var it sfItem
	var err error
	if strings.HasPrefix(s, `"`) {
		it.isStr = true
		it.str, s, err = parseSFString(s)
	} else {
		it.num, s, err = parseSFInteger(s)
	}
	if err != nil {
		return it, "", err
	}
	it.params = map[string]int64{}
	for strings.HasPrefix(s, ";") {
		s = strings.TrimLeft(s[1:], " ")
		k := 0
		for k < len(s) && (s[k] >= 'a' && s[k] <= 'z' || k > 0 && (s[k] >= '0' && s[k] <= '9' || strings.IndexByte("_-.*", s[k]) >= 0) || k == 0 && s[k] == '*') {
			k++
		}
		if k == 0 || k >= len(s) || s[k] != '=' {
			return it, "", fmt.Errorf("%q: bad parameter", s)
		}
		key := s[:k]
		if it.params[key], s, err = parseSFInteger(s[k+1:]); err != nil {
			return it, "", err
		}
	}
	return it, s, nil
}

func parseSFString(s string) (string, string, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			if i+1 >= len(s) || s[i+1] != '"' && s[i+1] != '\\' {
				return "", "", fmt.Errorf("%q: bad escape", s)
			}
			i++
			b.WriteByte(s[i])
		case c == '"':
			return b.String(), s[i+1:], nil
		case c < 0x20 || c > 0x7e:
			return "", "", fmt.Errorf("%q: byte %#x in a String", s, c)
		default:
			b.WriteByte(c)
		}
	}
	return "", "", fmt.Errorf("%q: unterminated String", s)
}

func parseSFInteger(s string) (int64, string, error) {
	i := 0
	if strings.HasPrefix(s, "-") {
		i++
	}
	j := i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	if j == i || j-i > 15 {
		return 0, "", fmt.Errorf("%q: not an Integer of 1 to 15 digits", s)
	}
	n, err := strconv.ParseInt(s[:j], 10, 64)
	return n, s[j:], err
}

// caseLimiter is a keyrate.PolicyLimiter whose every decision is the one
// its key names in cases: extreme values no real store returns every day.
type caseLimiter struct{ cases map[string]keyrate.Decision }

func (c *caseLimiter) Allow(key string) bool { return c.cases[key].Allowed }
func (c *caseLimiter) AllowN(key string, _ int) (keyrate.Decision, error) {
	return c.cases[key], nil
}
func (c *caseLimiter) Peek(key string) keyrate.Decision { return c.cases[key] }
func (c *caseLimiter) Len() int                         { return len(c.cases) }
func (c *caseLimiter) Tier(name string) (keyrate.Tier, error) {
	return keyrate.Tier{}, fmt.Errorf("%w: %q", keyrate.ErrUnknownPolicy, name)
}
func (c *caseLimiter) AllowTier(key string, _ keyrate.Tier, cost int) (keyrate.Decision, error) {
	return c.AllowN(key, cost)
}
func (c *caseLimiter) Refund(string, int) error                   { return nil }
func (c *caseLimiter) RefundTier(string, keyrate.Tier, int) error { return nil }
func (c *caseLimiter) SetPolicy(keyrate.Policy) error             { return nil }
func (c *caseLimiter) Policies() []keyrate.Policy                 { return nil }

// TestHeaderValuesAreStructuredFields sends decisions at the edges (a
// policy name of 300 bytes full of quotes, backslashes, control bytes,
// DEL and UTF-8; Remaining of math.MaxInt and negative; a Burst of 2^62;
// Retry-After and reset of the longest Duration; a window index of 7 of a
// policy the middleware does not know) through the middleware, with and
// without the legacy fields, and checks every field it sets: RateLimit and
// RateLimit-Policy parse as RFC 8941 Lists of String items with Integer
// parameters naming the same policy, counts are clamped to 15 digits and
// never negative, and Retry-After and the legacy fields are plain
// non-negative integers, Retry-After at least 1.
func TestHeaderValuesAreStructuredFields(t *testing.T) {
	weird := strings.Repeat(`a"b\c`+"\x00\x1f\x7f\xff"+"é", 30)
	huge := keyrate.Limit{Rate: 1, Per: time.Duration(math.MaxInt64), Burst: 1 << 62}
	cases := map[string]keyrate.Decision{
		"huge-allowed": {Allowed: true, Policy: weird, Limit: huge, Remaining: math.MaxInt, ResetAfter: math.MaxInt64, WindowResetAfter: math.MaxInt64},
		"huge-denied":  {Allowed: false, Policy: weird, Limit: huge, Remaining: -5, RetryAfter: math.MaxInt64, ResetAfter: math.MaxInt64},
		"window-7":     {Allowed: false, Policy: "p", Window: 7, Limit: keyrate.PerSecond(3), RetryAfter: 1, ResetAfter: time.Second},
		"long-name":    {Allowed: true, Policy: strings.Repeat("n", 200), Limit: keyrate.PerSecond(3), Remaining: 123456789012},
	}
	for _, legacy := range []bool{false, true} {
		opts := []Option{ByHeader("X-Case")}
		if legacy {
			opts = append(opts, WithLegacyHeaders())
		}
		mw, err := New(&caseLimiter{cases}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		for name, d := range cases {
			t.Run(fmt.Sprintf("legacy=%v/%s", legacy, name), func(t *testing.T) {
				r := httptest.NewRequest("GET", "/", nil)
				r.Header.Set("X-Case", name)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				hdr := w.Result().Header
				rl, err := parseSFList(hdr.Get("RateLimit"))
				if err != nil || len(rl) != 1 || !rl[0].isStr {
					t.Fatalf("RateLimit %q: %v (want one String item)", hdr.Get("RateLimit"), err)
				}
				pol, err := parseSFList(hdr.Get("RateLimit-Policy"))
				if err != nil || len(pol) == 0 {
					t.Fatalf("RateLimit-Policy %q: %v", hdr.Get("RateLimit-Policy"), err)
				}
				named := false
				for _, p := range pol {
					named = named || p.isStr && p.str == rl[0].str
					if p.params["q"] < 0 || p.params["w"] < 1 {
						t.Errorf("RateLimit-Policy item %+v: q or w out of range", p)
					}
				}
				if !named {
					t.Errorf("RateLimit names %q, which no RateLimit-Policy item (%q) does", rl[0].str, hdr.Get("RateLimit-Policy"))
				}
				if r, ok := rl[0].params["r"]; !ok || r < 0 || r > maxSFInteger || (d.Remaining > 0 && r != min(int64(d.Remaining), maxSFInteger)) {
					t.Errorf("RateLimit %q: r out of range or not Remaining %d", hdr.Get("RateLimit"), d.Remaining)
				}
				if tt, ok := rl[0].params["t"]; !ok || tt < 0 {
					t.Errorf("RateLimit %q: t missing or negative", hdr.Get("RateLimit"))
				}
				if !d.Allowed {
					if n, err := strconv.ParseInt(hdr.Get("Retry-After"), 10, 64); err != nil || n < 1 {
						t.Errorf("Retry-After %q: not delay-seconds of at least 1", hdr.Get("Retry-After"))
					}
				}
				if legacy {
					for _, f := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
						if n, err := strconv.ParseInt(hdr.Get(f), 10, 64); err != nil || n < 0 || n > math.MaxInt64/2 {
							t.Errorf("%s %q: not a non-negative integer", f, hdr.Get(f))
						}
					}
				}
			})
		}
	}
}

// TestHeaderValuesPerResponse serves concurrent requests through a real
// HTTP server, each decided with its own Remaining, whose handler checks
// the RateLimit value it was given and then tampers with its response's
// header values every way a handler can: assigns an element of a value
// slice, appends to one (whose capacity is one: a new array), Add, Set,
// Del. No response may see another's value, tampered or not, and each
// client must receive exactly what its handler left.
func TestHeaderValuesPerResponse(t *testing.T) {
	cases := map[string]keyrate.Decision{}
	const clients, requests = 8, 100
	for c := range clients {
		for r := range requests {
			id := fmt.Sprintf("%d-%d", c, r)
			cases[id] = keyrate.Decision{Allowed: r%4 != 3, Policy: keyrate.DefaultPolicy, Limit: keyrate.PerSecond(1000),
				Remaining: c*1000 + r, RetryAfter: time.Duration(r+1) * time.Second}
		}
	}
	for _, legacy := range []bool{false, true} {
		t.Run(fmt.Sprint("legacy=", legacy), func(t *testing.T) {
			opts := []Option{ByHeader("X-Case"), WithDeniedHandler(func(w http.ResponseWriter, r *http.Request, d keyrate.Decision) {
				w.Header()["Ratelimit"][0] = "denied-" + r.Header.Get("X-Case")
				w.WriteHeader(http.StatusTooManyRequests)
			})}
			if legacy {
				opts = append(opts, WithLegacyHeaders())
			}
			mw, err := New(&caseLimiter{cases}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				id := r.Header.Get("X-Case")
				h := w.Header()
				want := fmt.Sprintf(`"default";r=%d;t=0`, cases[id].Remaining)
				if got := h.Get("Ratelimit"); got != want {
					t.Errorf("request %s: handler sees RateLimit %q, want %q", id, got, want)
				}
				h["Ratelimit"][0] = "mine-" + id
				h["Ratelimit-Policy"] = append(h["Ratelimit-Policy"], "extra-"+id)
				h.Add("Retry-After", "7")
				if legacy {
					h.Set("X-Ratelimit-Remaining", id)
					h.Del("X-Ratelimit-Limit")
				}
			})))
			defer srv.Close()
			var wg sync.WaitGroup
			for c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for r := range requests {
						id := fmt.Sprintf("%d-%d", c, r)
						req, _ := http.NewRequest("GET", srv.URL, nil)
						req.Header.Set("X-Case", id)
						resp, err := srv.Client().Do(req)
						if err != nil {
							t.Error(err)
							return
						}
						resp.Body.Close()
						h := resp.Header
						if !cases[id].Allowed {
							if got := h.Get("Ratelimit"); got != "denied-"+id || h.Get("Retry-After") != strconv.Itoa(r+1) {
								t.Errorf("denied %s: RateLimit %q, Retry-After %q", id, got, h.Get("Retry-After"))
							}
							continue
						}
						if got := h.Values("Ratelimit"); len(got) != 1 || got[0] != "mine-"+id {
							t.Errorf("%s: RateLimit %q, want [mine-%s]", id, got, id)
						}
						if got := h.Values("Ratelimit-Policy"); len(got) != 2 || got[1] != "extra-"+id || got[0] != `"default";q=1000;w=1` {
							t.Errorf("%s: RateLimit-Policy %q", id, got)
						}
						if got := h.Values("Retry-After"); len(got) != 1 || got[0] != "7" {
							t.Errorf("%s: Retry-After %q", id, got)
						}
						if legacy && (h.Get("X-Ratelimit-Remaining") != id || h.Get("X-Ratelimit-Limit") != "" || h.Get("X-Ratelimit-Reset") != "0") {
							t.Errorf("%s: legacy fields %q %q %q", id, h.Get("X-Ratelimit-Limit"), h.Get("X-Ratelimit-Remaining"), h.Get("X-Ratelimit-Reset"))
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}
