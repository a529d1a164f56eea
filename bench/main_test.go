package bench

import (
	"flag"
	"testing"

	"github.com/keyrate/keyrate/internal/racetest"
)

// defaultLargeKeys is the distinct keys of the large workloads and of
// BenchmarkMemory unless -largekeys says otherwise.
const defaultLargeKeys = 1_000_000

// largeKeys is the -largekeys flag: the distinct keys of the large
// workloads (uniform-<n>, uniform-<n>-idle, zipf-<n>) and of
// BenchmarkMemory. make report's quick set passes -largekeys 100k.
var largeKeys = keyCount(defaultLargeKeys)

func init() {
	flag.Var(&largeKeys, "largekeys", "distinct keys of the large workloads and BenchmarkMemory (1M, 100k, or a number)")
}

// keyCount is a flag.Value holding a key count written as countName
// writes it.
type keyCount int

func (k *keyCount) String() string { return countName(int(*k)) }

func (k *keyCount) Set(s string) error {
	n, err := parseCount(s)
	if err != nil {
		return err
	}
	*k = keyCount(n)
	return nil
}

// TestMain builds the workloads for -largekeys and runs the benchmarks
// for racetest.BenchTime each under the race detector, unless -benchtime
// is given: there they only show that the harness is race-free, and a
// second for each of the dozens would take minutes.
func TestMain(m *testing.M) {
	flag.Parse()
	workloads = makeWorkloads(int(largeKeys))
	racetest.SetBenchTime()
	m.Run()
}
