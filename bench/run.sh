#!/usr/bin/env bash
# run.sh OUT COUNT BENCHTIME CPUS runs keyrate's benchmarks and saves what
# "keyrate report" reads: the raw output in OUT/bench.txt and the machine's
# facts, with the exact command, in OUT/machine.txt. CPUS is a -cpu list, or
# "auto" for 1, 2, 4, ... up to four times the machine's CPUs. Used by the bench
# and report targets of the Makefile.
set -euo pipefail
if [ $# -ne 4 ]; then
	echo "usage: bench/run.sh OUT COUNT BENCHTIME CPUS" >&2
	exit 2
fi
out=$1 count=$2 benchtime=$3 cpus=$4
go=${GO:-go}
cores=$(getconf _NPROCESSORS_ONLN)
if [ "$cpus" = auto ]; then
	cpus=1
	for ((c = 2; c <= 4 * cores; c *= 2)); do cpus="$cpus,$c"; done
fi
model=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//' ||
	sysctl -n machdep.cpu.brand_string 2>/dev/null || echo unknown)
# BenchmarkAllow at every -cpu value; BenchmarkMemory once, at GOMAXPROCS =
# the CPUs (its GC time is what a production process would see), appended.
allow="$go test -run '^\$' -bench '^BenchmarkAllow\$' -benchmem -count $count -benchtime $benchtime -cpu $cpus -timeout 0 ./bench"
memory="$go test -run '^\$' -bench '^BenchmarkMemory\$' -benchmem -count $count -timeout 0 ./bench"
# BenchmarkRedis (Allow against a local redis-server, beside an empty
# EVALSHA) and BenchmarkHotKey (one hot key from 4 stores × 8 goroutines,
# without and with leases), appended when redis-server is on PATH: at the default
# GOMAXPROCS, 1s a run, or 300ms when BENCHTIME is under 100ms (the quick
# set); REDIS_BENCHTIME overrides.
redis_benchtime=${REDIS_BENCHTIME:-1s}
if [ -z "${REDIS_BENCHTIME:-}" ] && [[ $benchtime =~ ^([0-9]+)ms$ ]] && ((10#${BASH_REMATCH[1]} < 100)); then
	redis_benchtime=300ms
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
echo "$allow > $out/bench.txt" >&2
eval "$allow" | tee "$out/bench.txt"
echo "$memory >> $out/bench.txt" >&2
eval "$memory" | tee -a "$out/bench.txt"
if [ -n "$redis" ]; then
	echo "$redis >> $out/bench.txt" >&2
	eval "$redis" | tee -a "$out/bench.txt"
fi
echo "load-after: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)" >>"$out/machine.txt"
