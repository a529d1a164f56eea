# keyrate's developer commands. `make test` is what CI runs; `make report`
# benchmarks the stores and writes the comparison report.
GO       ?= go
# keyrate is several modules developed together through go.work: the root
# module (the contract, the clock, the in-process stores, httplimit), whose
# users download nothing but xsync (and goleak for its tests), and one
# module each for redisbucket, grpclimit, the report tooling (cmd/keyrate)
# and the benchmarks (bench). Under go.work, ./... names the root module's
# packages only (a nested module is not part of it); the "work" pattern
# names the packages of every module in go.work, and MODULES their
# directories.
PKGS     := work
MODULES   = $(shell $(GO) list -m -f '{{.Dir}}')

# make fuzz runs each fuzz target for a fixed number of executions, not for
# a duration: a time-based -fuzztime can fail a healthy target with
# "context deadline exceeded" on a busy machine (golang/go#75804, a race in
# the fuzzing coordinator, fixed in no Go 1.26 release), and a count does
# the same work however busy the machine is. FUZZ_EXECS is each target's
# count, sized to take about 10s on the 2-core VM of the benchmark report
# (measured from the committed seed corpora, as .ci/run starts, under the
# load of a concurrent test run); a target it does not name runs
# FUZZ_EXECS_DEFAULT. FUZZTIME, when set, is the -fuzztime of every target
# instead (make fuzz FUZZTIME=2000000x; a duration such as 1m is subject to
# the race above).
FUZZTIME           ?=
FUZZ_EXECS         := FuzzLimitValidate=350000 FuzzStateRoundTrip=350000 \
                      FuzzReplay=40000 FuzzReplayReference=30000 \
                      FuzzClientIP=65000 FuzzDifferential=35000 FuzzStoresAgree=90000 \
                      FuzzRulesReference=4500 FuzzMap=30000 FuzzTable=40000 \
                      FuzzAgreeUnderChurn=30000 FuzzPolicyBound=30000 \
                      FuzzCarryModel=25000 FuzzCarryModelRedis=25000 FuzzCarryModelFleet=25000 \
                      FuzzParseConfig=100000 FuzzShouldRateLimit=30000
FUZZ_EXECS_DEFAULT := 50000
# Minimizing each new input is bounded by a count too: under the default
# (up to 60s an input) a counted pass of FuzzDifferential stalled for 40s
# minimizing one input.
FUZZMINIMIZETIME   ?= 1000x

.PHONY: test vet fmtcheck tidycheck depcheck readmecheck race fuzz benchrace bench report readme manycore rlsbench

## test: formatting, tidy go.mod files, the core's dependency count, the
## committed report and README figures up to date, vet, every module's
## suite under the race detector, short fuzzing
test: fmtcheck tidycheck depcheck readmecheck vet race benchrace fuzz

fmtcheck:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## tidycheck: fails when go mod tidy would change any module's go.mod or
## go.sum (it prints the diff)
tidycheck:
	@set -e; for m in $(MODULES); do \
		echo "go mod tidy -diff in $$m"; \
		(cd $$m && $(GO) mod tidy -diff); \
	done

## depcheck: builds a scratch service that imports only atomicbucket and
## fails if its module graph has more than 4 modules (see .ci/depcheck)
depcheck:
	GO=$(GO) .ci/depcheck

vet:
	$(GO) vet $(PKGS)

# -timeout 30m: atomicbucket's eviction attacks take about 2.5 minutes
# under -race on a shared 2-core machine; go test's default of 10 would
# leave a slower one little margin.
race:
	$(GO) test -race -count=1 -shuffle=on -timeout 30m $(PKGS)

## fuzz: every fuzz target for its FUZZ_EXECS executions (about 10s each),
## or for FUZZTIME each when set
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			t='$(FUZZTIME)'; \
			if [ -z "$$t" ]; then \
				n=$$(printf '%s\n' $(FUZZ_EXECS) | sed -n "s/^$$f=//p"); \
				t=$${n:-$(FUZZ_EXECS_DEFAULT)}x; \
			fi; \
			echo "fuzz $$pkg $$f ($$t)"; \
			$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime "$$t" -fuzzminimizetime $(FUZZMINIMIZETIME) $$pkg; \
		done; \
	done

## benchrace: every benchmark of every package once under the race
## detector, so that the harnesses themselves are race-free (they scale
## their key counts and inputs down under -race; see internal/racetest)
benchrace:
	$(GO) test -race -run '^$$' -bench . -benchtime 1x $(PKGS)

# The benchmark matrix (see bench/run.sh). make bench and make report FULL=1
# run the full one: -count 10 at -cpu 1, 2, 4, ... up to four times the
# CPUs (so that the charts show how each store degrades when goroutines
# outnumber cores), 150ms a benchmark, a million keys in the large
# workloads (uniform-1M, uniform-1M-idle, zipf-1M) and in BenchmarkMemory
# (about 28 minutes for BenchmarkAllow on 2 shared cores, an estimate from
# the 21 it took up to twice, and 4 for BenchmarkMemory on 2 shared cores,
# plus about 1.5 for BenchmarkMiddleware and, when redis-server is
# installed, BenchmarkRedis). make report runs a quick one, in under 3
# minutes on 2 cores: -count 6 at -cpu 1,2, 20ms a benchmark, 100k keys in
# the large workloads (named uniform-100k, uniform-100k-idle, zipf-100k)
# and in BenchmarkMemory (one build a sample), 100ms a BenchmarkRedis run
# (2m22s on a clean clone on the 2-core VM on 2026-11-27, with Go's build
# cache warm: BenchmarkAllow 1m24s, BenchmarkMiddleware 8s, BenchmarkMemory
# 5s, BenchmarkRedis 40s with its build, the report 2s; a cold build cache
# adds about a minute of compiling, once). The
# quick set cannot show memory per key and GC time at a million keys, the
# cache and TLB misses of a million-key table (100k keys of the pointer-free
# stores fit in a few MB of cache), the targets stated at a million keys,
# core counts above 2, or differences smaller than its wide intervals (6
# runs of 20ms); the report says so in its header. BenchmarkAllow's policy
# and wait rows, BenchmarkLeanFloor and BenchmarkMiddleware are part of
# both. Both print a
# progress line before each sub-benchmark, with an estimate of the time
# left.
BENCH_DATE := $(shell date -u +%Y-%m-%d)
BENCH_HOST := $(shell hostname)
FULL_ARGS  := 10 150ms auto 1M
FULL_OUT   := bench/results/$(BENCH_DATE)-$(BENCH_HOST)
ifeq ($(FULL),1)
BENCH_ARGS := $(FULL_ARGS)
BENCH_OUT  := $(FULL_OUT)
else
BENCH_ARGS := 6 20ms 1,2 100k
BENCH_OUT  := $(FULL_OUT)-quick
endif
REPORT_DIR ?= docs/report

## bench: the full benchmark matrix, raw output and machine facts saved
## under bench/results/<UTC date>-<host>/
bench:
	GO=$(GO) bench/run.sh $(FULL_OUT) $(FULL_ARGS)

## report: a quick benchmark matrix, about 3 minutes on 2 cores, with 100k
## keys where the full one has a million (FULL=1: the full one), then the
## markdown report and SVG charts in REPORT_DIR (default docs/report)
report:
	GO=$(GO) bench/run.sh $(BENCH_OUT) $(BENCH_ARGS)
	$(GO) run ./cmd/keyrate report -o $(REPORT_DIR) $(BENCH_OUT)

# The committed benchmark report (REPORT_DOC) and the raw results it is
# generated from (REPORT_SET). README.md quotes its figures only in a block
# that keyrate report -readme writes, so that they cannot go stale: after a
# new full run (make bench), point these at it and run make readme.
REPORT_SET := bench/results/2026-11-24-vm
REPORT_DOC := docs/benchmarks-2026-11-24

# The committed report across core counts (MANYCORE_DOC), from a run on a
# 16-core machine (MANYCORE_SET: BenchmarkAllow at -cpu 1 to 32, and an
# outside harness's peers.txt; its README.md says how it was run). The
# README's figures stay the 2-core report's; make manycore regenerates it
# alone, make readme both.
MANYCORE_SET := bench/results/2026-11-27-xeon-16
MANYCORE_DOC := docs/benchmarks-2026-11-27-xeon-16

## readme: regenerate the committed reports from REPORT_SET and
## MANYCORE_SET, and README.md's figures from REPORT_SET
readme: manycore
	$(GO) run ./cmd/keyrate report -o $(REPORT_DOC) -readme README.md $(REPORT_SET)

## manycore: regenerate the committed report across core counts
## (MANYCORE_DOC) from MANYCORE_SET
manycore:
	$(GO) run ./cmd/keyrate report -o $(MANYCORE_DOC) $(MANYCORE_SET)

## readmecheck: fails if make readme would change the committed reports or
## README.md (the report generator changed, or someone edited its output)
readmecheck:
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	cp README.md "$$tmp/README.md"; \
	$(GO) run ./cmd/keyrate report -o "$$tmp/$(REPORT_DOC)" -readme "$$tmp/README.md" $(REPORT_SET) >/dev/null; \
	$(GO) run ./cmd/keyrate report -o "$$tmp/$(MANYCORE_DOC)" $(MANYCORE_SET) >/dev/null; \
	if ! diff -r $(REPORT_DOC) "$$tmp/$(REPORT_DOC)" >/dev/null || ! diff -u README.md "$$tmp/README.md"; then \
		echo "readmecheck: $(REPORT_DOC) or README.md is not what make readme generates from $(REPORT_SET): run make readme"; \
		exit 1; \
	fi; \
	if ! diff -r $(MANYCORE_DOC) "$$tmp/$(MANYCORE_DOC)" >/dev/null; then \
		echo "readmecheck: $(MANYCORE_DOC) is not what make manycore generates from $(MANYCORE_SET): run make manycore"; \
		exit 1; \
	fi

## rlsbench: envoyproxy/ratelimit with Redis, keyrate-rls with Redis and
## keyrate-rls in process, side by side over gRPC at 1, 8 and 64 clients
## (about 2 minutes; not part of make report). It installs the reference
## binary from the module proxy and starts its own redis-server; the
## report goes to RLSBENCH_OUT.
RLSBENCH_OUT ?= docs/ratelimitsvc-benchmark.md
rlsbench:
	$(GO) install github.com/envoyproxy/ratelimit/src/service_cmd@v1.4.1-0.20260122083618-3fb702589d36
	$(GO) run ./ratelimitsvc/cmd/rls-load -envoy-bin "$$($(GO) env GOPATH)/bin/service_cmd" -o $(RLSBENCH_OUT)
