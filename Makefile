# keyrate's developer commands. `make test` is what CI runs; `make report`
# benchmarks the stores and writes the comparison report.
GO       ?= go
FUZZTIME ?= 10s
PKGS     := ./...

.PHONY: test vet fmtcheck race fuzz benchrace bench report

## test: formatting, vet, the whole suite under the race detector, short fuzzing
test: fmtcheck vet race benchrace fuzz

fmtcheck:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

race:
	$(GO) test -race -count=1 -shuffle=on $(PKGS)

## fuzz: every fuzz target for FUZZTIME each (default 10s)
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "fuzz $$pkg $$f ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

## benchrace: every benchmark once under the race detector, so that the
## harness itself is race-free (key counts are scaled down under -race)
benchrace:
	$(GO) test -race -run '^$$' -bench . -benchtime 1x ./bench/...

# The benchmark matrix (see bench/run.sh). make bench and make report FULL=1
# run the full one: -count 10 at -cpu 1, 2, 4, ... up to twice the CPUs,
# 150ms a benchmark (about 21 minutes for BenchmarkAllow and 4 for
# BenchmarkMemory on 2 shared cores, plus BenchmarkRedis when redis-server is
# installed); make report runs a quick one (-count 6 at -cpu 1,2, 20ms a
# benchmark: about 6 minutes on 2 cores, most of it building million-key
# stores).
BENCH_DATE := $(shell date -u +%Y-%m-%d)
BENCH_HOST := $(shell hostname)
FULL_ARGS  := 10 150ms auto
FULL_OUT   := bench/results/$(BENCH_DATE)-$(BENCH_HOST)
ifeq ($(FULL),1)
BENCH_ARGS := $(FULL_ARGS)
BENCH_OUT  := $(FULL_OUT)
else
BENCH_ARGS := 6 20ms 1,2
BENCH_OUT  := $(FULL_OUT)-quick
endif
REPORT_DIR ?= docs/report

## bench: the full benchmark matrix, raw output and machine facts saved
## under bench/results/<UTC date>-<host>/
bench:
	GO=$(GO) bench/run.sh $(FULL_OUT) $(FULL_ARGS)

## report: a quick benchmark matrix (FULL=1: the full one), then the
## markdown report and SVG charts in REPORT_DIR (default docs/report)
report:
	GO=$(GO) bench/run.sh $(BENCH_OUT) $(BENCH_ARGS)
	$(GO) run ./cmd/keyrate report -o $(REPORT_DIR) $(BENCH_OUT)
