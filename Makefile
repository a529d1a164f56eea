# keyrate's developer commands. `make test` is what CI runs; `make report`
# benchmarks the stores and writes the comparison report.
GO       ?= go
FUZZTIME ?= 10s
PKGS     := ./...

.PHONY: test vet fmtcheck race fuzz

## test: formatting, vet, the whole suite under the race detector, short fuzzing
test: fmtcheck vet race fuzz

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
