package keyrate_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/mutexbucket"
	"github.com/keyrate/keyrate/striped"
)

// TestAllowAllNilLimiter checks that AllowAll given no limiter, or a nil
// pointer of a store's type, returns an error wrapping ErrInvalidOption
// that names the type, and does not panic.
func TestAllowAllNilLimiter(t *testing.T) {
	ks := []keyrate.KeyCost{{Key: "a", Cost: 1}, {Key: "b", Cost: 1}}
	for _, c := range []struct {
		name string
		l    keyrate.PolicyLimiter
		says string
	}{
		{"nil", nil, "no limiter"},
		{"atomicbucket", (*atomicbucket.Store)(nil), "*atomicbucket.Store"},
		{"mutexbucket", (*mutexbucket.Store)(nil), "*mutexbucket.Store"},
		{"striped", (*striped.Store)(nil), "*striped.Store"},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("AllowAll(%s) panicked: %v", c.name, r)
				}
			}()
			d, err := keyrate.AllowAll(c.l, ks)
			if !errors.Is(err, keyrate.ErrInvalidOption) || !strings.Contains(err.Error(), c.says) || d.Allowed {
				t.Fatalf("AllowAll(%s) = %+v, %v; want an error wrapping ErrInvalidOption naming %q", c.name, d, err, c.says)
			}
		})
	}
}
