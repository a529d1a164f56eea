package httplimit

import (
	"net/http"
	"strconv"
	"time"

	"github.com/keyrate/keyrate"
)

// Header field names, in the canonical form http.Header stores them in, so
// that the middleware can write the map directly and Header.Get finds them.
const (
	fieldPolicy       = "Ratelimit-Policy"
	fieldRateLimit    = "Ratelimit"
	fieldRetryAfter   = "Retry-After"
	fieldLegacyLimit  = "X-Ratelimit-Limit"
	fieldLegacyRemain = "X-Ratelimit-Remaining"
	fieldLegacyReset  = "X-Ratelimit-Reset"
)

// policyFields holds the header values that depend only on the Limit.
type policyFields struct {
	limit  keyrate.Limit
	policy string // RateLimit-Policy: "name";q=Burst;w=FillTime
	prefix string // RateLimit's start: "name";r=
	burst  string // X-RateLimit-Limit
}

// newPolicyFields builds the fields for policy name and limit.
func newPolicyFields(name string, limit keyrate.Limit) *policyFields {
	quoted := `"` + name + `"`
	burst := strconv.FormatInt(sfCount(limit.Burst), 10)
	w := max(ceilSeconds(limit.FillTime()), 1)
	return &policyFields{
		limit:  limit,
		policy: quoted + ";q=" + burst + ";w=" + strconv.FormatInt(w, 10),
		prefix: quoted + ";r=",
		burst:  burst,
	}
}

// maxSFInteger is the largest structured-field Integer (RFC 8941: at most
// 15 digits).
const maxSFInteger = 999_999_999_999_999

// sfCount returns n as a header count: clamped to [0, maxSFInteger], so
// that a Burst or Remaining beyond 15 digits (keyrate allows a Burst up
// to 2^62) is still a valid Integer, and a negative one (which no store
// returns) is not sent.
func sfCount(n int) int64 {
	return min(max(int64(n), 0), maxSFInteger)
}

// ceilSeconds returns d in whole seconds, rounded up; 0 for d ≤ 0. The
// longest time.Duration is 9223372037 s, well within an Integer.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d-1)/time.Second) + 1
}

// setHeaders sets the rate-limit fields for decision d on h, and
// Retry-After if d is a deny. It costs two allocations whatever the
// options: one string holding every per-request value (the others are
// slices of it) and one backing array for the value slices.
func (m *middleware) setHeaders(h http.Header, d keyrate.Decision) {
	p := m.policyFor(d.Limit)
	t := ceilSeconds(d.ResetAfter)
	if !d.Allowed {
		// The draft: reset SHOULD name the same instant as Retry-After.
		// Retry-After is never 0 on a deny.
		t = max(ceilSeconds(d.RetryAfter), 1)
	}
	var buf [128]byte // the longest value: 69 + 2·20 + 3 bytes
	b := append(buf[:0], p.prefix...)
	r0 := len(b)
	b = strconv.AppendInt(b, sfCount(d.Remaining), 10)
	r1 := len(b)
	b = append(b, ";t="...)
	t0 := len(b)
	b = strconv.AppendInt(b, t, 10)
	s := string(b)
	remaining, reset := s[r0:r1], s[t0:]

	n := 2
	if !d.Allowed {
		n++
	}
	if m.legacy {
		n += 3
	}
	vals := make([]string, n)
	set := func(i int, name, v string) int {
		vals[i] = v
		h[name] = vals[i : i+1 : i+1]
		return i + 1
	}
	i := set(0, fieldPolicy, p.policy)
	i = set(i, fieldRateLimit, s)
	if !d.Allowed {
		i = set(i, fieldRetryAfter, reset)
	}
	if m.legacy {
		i = set(i, fieldLegacyLimit, p.burst)
		i = set(i, fieldLegacyRemain, remaining)
		set(i, fieldLegacyReset, reset)
	}
}
