package report

import (
	"fmt"
	"strings"
)

// BenchmarkMiddleware's names (see package bench): keyrate's httplimit,
// which the others are compared with, and the outcome= part of its
// allowed requests.
const (
	mwHTTPLimit = "httplimit"
	mwAllowed   = "outcome=allowed"
)

// mwAllocsMax is the most allocations an allowed request through httplimit
// may make (the target of issue 29).
const mwAllocsMax = 1

// mwNotes says what each middleware of BenchmarkMiddleware is, as the
// benchmark builds it.
var mwNotes = map[string]string{
	"httplimit":  "keyrate's `httplimit.New` over `atomicbucket` (token bucket; key `ByIP`; sets `RateLimit-Policy` and `RateLimit`)",
	"httprate":   "`github.com/go-chi/httprate`'s `LimitBy` with its in-memory counter (sliding window; key `KeyByIP`; sets `X-RateLimit-*`)",
	"go-limiter": "`github.com/sethvargo/go-limiter`'s `httplimit` over its `memorystore` (tokens per interval; key `IPKeyFunc()`; sets `X-RateLimit-*`)",
	"tollbooth":  "`github.com/didip/tollbooth/v7`'s `LimitHandler` (an x/time/rate limiter per key; key `RemoteAddr` alone, the URL ignored; sets `X-Rate-Limit-*` and `RateLimit-*`)",
}

// MiddlewareRatio is a middleware's ns/op against httplimit's on one run
// (keys and outcome) at one core count, both measured in one run.
type MiddlewareRatio struct {
	Middleware, Run string
	Procs           int
	MedianRatio
}

// MiddlewareRatios returns the ratio of every other middleware's median
// ns/op to httplimit's, for each run and core count where both were
// measured, in the order of MiddlewareRuns, MiddlewareProcs and
// Middlewares.
func (s *Set) MiddlewareRatios() []MiddlewareRatio {
	var out []MiddlewareRatio
	for _, run := range s.MiddlewareRuns {
		for _, p := range s.MiddlewareProcs {
			for _, mw := range s.Middlewares {
				if mw == mwHTTPLimit {
					continue
				}
				r, ok := s.medianRatio(mwCell(mw, run, p, unitNs), mwCell(mwHTTPLimit, run, p, unitNs))
				if ok {
					out = append(out, MiddlewareRatio{Middleware: mw, Run: run, Procs: p, MedianRatio: r})
				}
			}
		}
	}
	return out
}

// middlewareTarget: httplimit faster than every other middleware measured
// (a significant difference, Mann-Whitney U at α = 0.05) on every run and
// at every core count up to the CPUs, and at most mwAllocsMax allocations
// an allowed request. Only a set with BenchmarkMiddleware results has it,
// so that the reports of earlier runs keep their list of targets.
func (s *Set) middlewareTarget() Verdict {
	c := newCheck(fmt.Sprintf("httplimit faster than every other middleware measured (ns/op, a significant difference) on each outcome, at every core count up to the CPUs, and ≤ %d allocs/op on an allowed request", mwAllocsMax))
	for _, r := range s.MiddlewareRatios() {
		if s.Oversubscribed(r.Procs) {
			continue
		}
		note := ""
		if r.Test.P >= r.Test.Alpha {
			note = fmt.Sprintf("; no significant difference (%s)", r.Test)
		}
		c.add(r.Ratio > 1 && r.Test.P < r.Test.Alpha, "%s %s -cpu %d: httplimit %s%s", r.Middleware, r.Run, r.Procs,
			speedThan(r.Ratio, r.Middleware), note)
	}
	for _, run := range s.MiddlewareRuns {
		if !strings.Contains(run, mwAllowed) {
			continue
		}
		for _, p := range s.MiddlewareProcs {
			if a, ok := s.Median(mwCell(mwHTTPLimit, run, p, unitAllocs)); ok {
				c.add(a <= mwAllocsMax, "httplimit %s -cpu %d: %g allocs/op", run, p, a)
			}
		}
	}
	return c.done()
}

// middlewares writes BenchmarkMiddleware: httplimit beside the middlewares
// a user would pick instead, on the same handler, clients and limit.
func (m *md) middlewares() {
	s := m.s
	if len(s.Middlewares) == 0 {
		return
	}
	m.p("## httplimit against other middlewares\n")
	m.p("BenchmarkMiddleware (bench/middleware_test.go): each middleware as its documentation builds it, wrapping the same handler (which only writes 200), keyed by the client's IP address from `RemoteAddr`, under the same limit per client: a billion requests an hour (`outcome=allowed`: every request is served) or one an hour, spent in setup (`outcome=denied`: every request gets the middleware's own 429). Requests come from 1000 clients in shuffled rounds; setup checks that each middleware refuses a client's 4th request under a limit of 3 while serving another client, and the run checks every status. Each sets its own header fields, as a user would get them.\n")
	for _, mw := range s.Middlewares {
		note := mwNotes[mw]
		if note == "" {
			note = "as found in the results"
		}
		m.p("- `%s`: %s.", mw, note)
	}
	m.p("")
	m.p("Median ns/op ± its 95%% interval; the ratio of each middleware's median to httplimit's at the same core count, in brackets the ratios of the bounds of the two medians' intervals (at least 90%% confidence); the change from httplimit and the p-value of a Mann-Whitney U test (benchmath.AssumeNothing), `~` where there is no significant difference at α = 0.05, as benchstat prints them. allocs/op and B/op are medians.\n")
	for _, run := range s.MiddlewareRuns {
		m.p("### %s\n", strings.ReplaceAll(run, "/", ", "))
		m.p("| middleware | cores | ns/op | ÷ httplimit | vs httplimit | allocs/op | B/op |\n|---|---|---:|---|---|---:|---:|")
		for _, p := range s.MiddlewareProcs {
			for _, mw := range s.Middlewares {
				c := mwCell(mw, run, p, unitNs)
				if _, ok := s.Median(c); !ok {
					continue
				}
				ratio, test := "1×", ""
				if mw != mwHTTPLimit {
					ratio, test = "—", "—"
					if r, ok := s.medianRatio(c, mwCell(mwHTTPLimit, run, p, unitNs)); ok {
						base, _ := s.Median(mwCell(mwHTTPLimit, run, p, unitNs))
						row, _ := s.Median(c)
						ratio, test = r.String(), r.Test.FormatDelta(base, row)+" "+r.Test.String()
					}
				}
				allocs, bytes := "—", "—"
				if a, ok := s.Median(mwCell(mw, run, p, unitAllocs)); ok {
					allocs = fmt.Sprintf("%g", a)
				}
				if b, ok := s.Median(mwCell(mw, run, p, unitBytes)); ok {
					bytes = fmt.Sprintf("%g", b)
				}
				m.p("| `%s` | %s | %s | %s | %s | %s | %s |", mw, m.procsLabel(p), fmtSummary(s, c), ratio, test, allocs, bytes)
			}
		}
		m.p("")
	}
	m.oversubNote()
}
