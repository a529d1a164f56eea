package striped_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/striped"
)

// WithStripes: "a power of two from 1 to MaxStripes; any other n makes New
// fail with an error wrapping keyrate.ErrInvalidOption" that names it; the
// bounds themselves build a working store.
func TestMisuseWithStripes(t *testing.T) {
	for _, n := range []int{0, -1, 3, 6, striped.MaxStripes + 1, striped.MaxStripes * 2, 1 << 62} {
		_, err := striped.New(keyrate.PerSecond(1), striped.WithStripes(n))
		if !errors.Is(err, keyrate.ErrInvalidOption) || !strings.Contains(err.Error(), "WithStripes") {
			t.Errorf("WithStripes(%d): New = %v, want ErrInvalidOption naming the option", n, err)
		}
	}
	for _, n := range []int{1, 2, striped.MaxStripes} {
		s, err := striped.New(keyrate.PerSecond(1), striped.WithStripes(n))
		if err != nil {
			t.Fatalf("WithStripes(%d): New = %v", n, err)
		}
		if !s.Allow("a") || !s.Allow("b") || s.Allow("a") || s.Len() != 2 {
			t.Errorf("WithStripes(%d): a store that does not limit per key", n)
		}
		s.Close()
	}
	if n := striped.DefaultStripes(); n < 16 || n&(n-1) != 0 {
		t.Errorf("DefaultStripes() = %d, want a power of two of at least 16", n)
	}
}
