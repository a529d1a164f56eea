#!/usr/bin/env bash
# run.sh OUT COUNT BENCHTIME CPUS [LARGEKEYS] runs keyrate's benchmarks and
# saves what "keyrate report" reads: the raw output in OUT/bench.txt and the
# machine's facts, with the exact command, in OUT/machine.txt. CPUS is a
# -cpu list, or "auto" for 1, 2, 4, ... up to four times the machine's CPUs.
# LARGEKEYS is the distinct keys of the large workloads and BenchmarkMemory
# (1M, the default, or 100k for make report's quick set; the workload names
# say it: uniform-1M, uniform-100k). Used by the bench and report targets of
# the Makefile.
#
# It prints each result as it comes, and before each sub-benchmark of
# package bench a "# progress" line (which sub-benchmark, how far through
# its benchmark, the time so far and an estimate of the time left), kept
# out of bench.txt.
set -euo pipefail
if [ $# -lt 4 ] || [ $# -gt 5 ]; then
	echo "usage: bench/run.sh OUT COUNT BENCHTIME CPUS [LARGEKEYS]" >&2
	exit 2
fi
out=$1 count=$2 benchtime=$3 cpus=$4 largekeys=${5:-1M}
go=${GO:-go}
cores=$(getconf _NPROCESSORS_ONLN)
if [ "$cpus" = auto ]; then
	cpus=1
	for ((c = 2; c <= 4 * cores; c *= 2)); do cpus="$cpus,$c"; done
fi
model=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//' ||
	sysctl -n machdep.cpu.brand_string 2>/dev/null || echo unknown)
# A BENCHTIME under 100ms makes the quick set (make report): see below.
quick=false
if [[ $benchtime =~ ^([0-9]+)ms$ ]] && ((10#${BASH_REMATCH[1]} < 100)); then
	quick=true
fi
# BenchmarkAllow, BenchmarkLeanFloor (the floor without the driver's call,
# which the report sets beside the floor) and BenchmarkMiddleware at every
# -cpu value; BenchmarkMemory
# once, at GOMAXPROCS = the CPUs (its GC time is what a production process
# would see), appended: under the default -benchtime, or one build a sample
# (-benchtime 1x) in the quick set, where the default would build a store
# of 100k keys a dozen times a sample (at a million keys one build takes
# about the default's second).
allow="$go test -run '^\$' -bench '^Benchmark(Allow|LeanFloor|Middleware)\$' -benchmem -count $count -benchtime $benchtime -cpu $cpus -timeout 0 ./bench -largekeys $largekeys -progress"
memory_benchtime=""
! $quick || memory_benchtime=" -benchtime 1x"
memory="$go test -run '^\$' -bench '^BenchmarkMemory\$' -benchmem -count $count$memory_benchtime -timeout 0 ./bench -largekeys $largekeys -progress"
# BenchmarkRedis (Allow against a local redis-server, beside an empty
# EVALSHA) and BenchmarkHotKey (one hot key from 4 stores × 8 goroutines,
# without and with leases), appended when redis-server is on PATH: at the default
# GOMAXPROCS, 1s a run, or 100ms in the quick set; REDIS_BENCHTIME
# overrides.
redis_benchtime=${REDIS_BENCHTIME:-1s}
if [ -z "${REDIS_BENCHTIME:-}" ] && $quick; then
	redis_benchtime=100ms
fi
redis=""
if command -v redis-server >/dev/null 2>&1; then
	redis="$go test -run '^\$' -bench '^Benchmark(Redis|HotKey)\$' -benchmem -count $count -benchtime $redis_benchtime -timeout 0 ./redisbucket"
fi
mkdir -p "$out"
{
	echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "host: $(hostname)"
	echo "cpu: $model"
	echo "cores: $cores"
	echo "go: $($go version)"
	echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (working tree modified)')"
	echo "load-before: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"
	if [ -n "$redis" ]; then
		echo "command: $allow > bench.txt && $memory >> bench.txt && $redis >> bench.txt"
	else
		echo "command: $allow > bench.txt && $memory >> bench.txt"
		echo "redis: skipped (no redis-server on PATH)"
	fi
} >"$out/machine.txt"

steps=2
[ -z "$redis" ] || steps=3
start=$SECONDS
# step N WHAT CMD runs CMD, printing every line it writes and appending
# all but the progress lines to bench.txt.
step() {
	local t=$((SECONDS - start))
	printf '# step %d of %d: %s (%dm%02ds since the start)\n# %s\n' "$1" "$steps" "$2" $((t / 60)) $((t % 60)) "$3" >&2
	eval "$3" | while IFS= read -r line; do
		printf '%s\n' "$line"
		[[ $line == '# progress'* ]] || printf '%s\n' "$line" >>"$out/bench.txt"
	done
}
: >"$out/bench.txt"
step 1 "BenchmarkAllow and BenchmarkMiddleware at -cpu $cpus, -count $count" "$allow"
step 2 "BenchmarkMemory, $largekeys keys a store, -count $count" "$memory"
if [ -n "$redis" ]; then
	step 3 "BenchmarkRedis and BenchmarkHotKey against a local redis-server, $redis_benchtime a run, -count $count" "$redis"
fi
t=$((SECONDS - start))
printf '# done in %dm%02ds: %s\n' $((t / 60)) $((t % 60)) "$out/bench.txt" >&2
echo "load-after: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)" >>"$out/machine.txt"
