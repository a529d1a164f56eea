package httplimit

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestAppendDecimal checks appendDecimal against strconv.AppendUint at
// every digit count's edges (0, 9, 10, 99, 100, ..., MaxUint64), on random
// values, and after a prefix that fills a buffer's capacity or not.
func TestAppendDecimal(t *testing.T) {
	ns := []uint64{0, math.MaxUint64, math.MaxInt64, maxSFInteger}
	for p := uint64(1); p <= 1e19; p *= 10 {
		ns = append(ns, p-1, p, p+1)
		if p == 1e19 {
			break
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		ns = append(ns, r.Uint64()>>r.UintN(64))
	}
	for _, n := range ns {
		for _, prefix := range [][]byte{nil, []byte(`"default";r=`), make([]byte, 3, 4), make([]byte, 5, 32)} {
			want := strconv.AppendUint(append([]byte(nil), prefix...), n, 10)
			got := appendDecimal(prefix, n)
			if string(got) != string(want) {
				t.Fatalf("appendDecimal(%q, %d) = %q, want %q", prefix, n, got, want)
			}
		}
	}
}
