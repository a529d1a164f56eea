package httplimit

import (
	"math/bits"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unsafe"

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

// policyFields holds the header values that depend only on a policy's
// limits: built once per version of a policy and shared by every request
// decided under it.
type policyFields struct {
	// policy is the Decision.Policy the fields were built for, and limits
	// the policy's windows as the middleware last learnt them. A zero
	// Limit is a window it does not know (see newPolicyFields).
	policy string
	limits []keyrate.Limit
	// ver is the limiter's count of policy changes read before the
	// fields were built: they are stale once the count moves.
	ver uint64
	// field is the RateLimit-Policy value: one item per known window.
	field string
	// windows holds, per window, the start of a RateLimit value naming it
	// (`"name";r=`) and its Burst for X-RateLimit-Limit.
	windows []windowFields
}

// windowFields holds the values for one window of a policy.
type windowFields struct {
	prefix string // RateLimit's start: "item";r=
	burst  string // X-RateLimit-Limit
}

// newPolicyFields builds the fields for a policy shown as name (the
// policy's name, or WithPolicyName's for the default), whose decisions
// name it decision, with the windows limits. A zero Limit in limits is a
// window the middleware does not know: it gets no RateLimit-Policy item,
// and a decision reporting it never matches (see matches).
func newPolicyFields(name, decision string, limits []keyrate.Limit) *policyFields {
	p := &policyFields{policy: decision, limits: limits, windows: make([]windowFields, len(limits))}
	var field []byte
	for i, l := range limits {
		if l == (keyrate.Limit{}) {
			continue
		}
		item := appendSFString(nil, itemName(name, i, len(limits)))
		burst := strconv.FormatInt(sfCount(l.Burst), 10)
		if len(field) > 0 {
			field = append(field, ", "...)
		}
		field = append(field, item...)
		field = append(field, ";q="...)
		field = append(field, burst...)
		field = append(field, ";w="...)
		field = strconv.AppendInt(field, max(ceilSeconds(quotaWindow(l)), 1), 10)
		p.windows[i] = windowFields{prefix: string(item) + ";r=", burst: burst}
	}
	p.field = string(field)
	return p
}

// quotaWindow returns the time window of l's quota, the w of its
// RateLimit-Policy item: the time an empty token bucket takes to fill
// (its Burst comes back in that time), and a window algorithm's window.
func quotaWindow(l keyrate.Limit) time.Duration {
	if l.Algorithm.Windowed() {
		return l.Per
	}
	return l.FillTime()
}

// matches reports whether p describes d's window: made for d's policy,
// with d's Limit as the limit of window w.
func (p *policyFields) matches(d *keyrate.Decision, w int) bool {
	return w < len(p.limits) && p.limits[w] == d.Limit && p.policy == d.Policy
}

// itemName returns the name of window i of the n windows of the policy
// shown as name: name itself for a one-window policy, and name-i (i from
// 0, the window's index in the policy's Limits and in Decision.Window)
// for a policy of several windows.
func itemName(name string, i, n int) string {
	if n == 1 {
		return name
	}
	return name + "-" + strconv.Itoa(i)
}

// headerBlock is the one allocation setHeaders makes per response: the
// backing array of the field values it sets (V is [2]string for an
// allowed request, [3]string with Retry-After, [6]string with the legacy
// fields), each field's value slice a one-element slice of it,
// capacity-limited so that an append to one field cannot reach the next;
// and the bytes of the per-request values (RateLimit's, of which
// Remaining and Reset are slices), turned into a string in place once
// written. 32 bytes hold a RateLimit value for "default" with up to 12
// digits of Remaining and 5 of reset, and for a policy name of up to 13
// bytes with typical counts (7 and 3 digits); a longer value grows on the
// heap, a second allocation. The block is 64 bytes for an allowed request
// (the smallest size class that holds it: the allocator's and the garbage
// collector's work per request follows the bytes), 80 for a denied one,
// and 128 with the legacy fields.
type headerBlock[V any] struct {
	vals V
	buf  [32]byte
}

// appendSFString appends s to b as a structured-field String (RFC 8941,
// section 3.3.3): in double quotes, with '"' and '\' escaped by a
// backslash. A String holds only printable ASCII, so any other byte
// (a control character, or part of a multi-byte UTF-8 sequence) is sent
// as '?'.
func appendSFString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c > 0x7e:
			b = append(b, '?')
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
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

// digitPairs holds the two decimal digits of each of 0 to 99.
const digitPairs = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"

// pow10 holds the powers of 10 that fit in a uint64.
var pow10 = [20]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19}

// appendDecimal appends n in decimal to b: strconv.AppendUint(b, n, 10),
// written in place, two digits a step, without strconv's intermediate
// buffer and copy. It is on the path of every response.
func appendDecimal(b []byte, n uint64) []byte {
	// log10(2) ≈ 1233/4096: t+1 is the number of digits or one more. (n|1
	// has n's digits, and gives 0 one.)
	t := bits.Len64(n|1) * 1233 >> 12
	digits := t + 1
	if n|1 < pow10[t] {
		digits = t
	}
	b = slices.Grow(b, digits)
	i := len(b) + digits
	b = b[:i]
	for n >= 100 {
		q := n / 100
		r := (n - q*100) * 2
		i -= 2
		b[i], b[i+1] = digitPairs[r], digitPairs[r+1]
		n = q
	}
	if n >= 10 {
		i -= 2
		b[i], b[i+1] = digitPairs[n*2], digitPairs[n*2+1]
	} else {
		b[i-1] = byte('0' + n)
	}
	return b
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
// Retry-After if d is a deny (not in shadow mode, which lets it through);
// slot is the policy the request named, or nil. It costs one allocation
// whatever the options (a headerBlock: see there), two for a policy name
// too long for the block's bytes. A decision under an unlimited policy
// (its Limit is the zero Limit) gets no rate-limit fields.
func (m *middleware) setHeaders(h http.Header, d *keyrate.Decision, slot *policySlot) {
	if d.Limit == (keyrate.Limit{}) {
		if !d.Allowed && !m.shadow { // no store denies under an unlimited policy; never send a deny without it
			h[fieldRetryAfter] = []string{strconv.FormatInt(max(ceilSeconds(d.RetryAfter), 1), 10)}
		}
		return
	}
	w := max(d.Window, 0)
	p := m.fieldsFor(d, w, slot)
	t := ceilSeconds(d.ResetAfter)
	if len(p.limits) > 1 {
		t = ceilSeconds(d.WindowResetAfter)
	}
	if !d.Allowed {
		// The draft: reset SHOULD name the same instant as Retry-After.
		// Retry-After is never 0 on a deny.
		t = max(ceilSeconds(d.RetryAfter), 1)
	}
	// A deny gets Retry-After, unless shadow mode lets it through.
	retry := !d.Allowed && !m.shadow
	n := 2
	if retry {
		n++
	}
	var vals []string
	var b []byte
	switch {
	case m.legacy:
		blk := new(headerBlock[[6]string])
		vals, b = blk.vals[:n+3], blk.buf[:0]
	case retry:
		blk := new(headerBlock[[3]string])
		vals, b = blk.vals[:], blk.buf[:0]
	default: // the common case: the smallest block
		blk := new(headerBlock[[2]string])
		vals, b = blk.vals[:], blk.buf[:0]
	}
	win := &p.windows[w]
	b = append(b, win.prefix...)
	r0 := len(b)
	b = appendDecimal(b, uint64(sfCount(d.Remaining)))
	r1 := len(b)
	b = append(b, ";t="...)
	t0 := len(b)
	b = appendDecimal(b, uint64(t))
	// The block's bytes (or, past them, the array append grew) are never
	// written again: they are the string's from here on.
	s := unsafe.String(unsafe.SliceData(b), len(b))
	remaining, reset := s[r0:r1], s[t0:]

	set := func(i int, name, v string) int {
		vals[i] = v
		h[name] = vals[i : i+1 : i+1]
		return i + 1
	}
	i := set(0, fieldPolicy, p.field)
	i = set(i, fieldRateLimit, s)
	if retry {
		i = set(i, fieldRetryAfter, reset)
	}
	if m.legacy {
		i = set(i, fieldLegacyLimit, win.burst)
		i = set(i, fieldLegacyRemain, remaining)
		set(i, fieldLegacyReset, reset)
	}
}
