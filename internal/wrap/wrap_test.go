package wrap_test

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/keyrate/keyrate/internal/wrap"
)

var (
	errA     = errors.New("keyrate: invalid limit")
	errB     = errors.New("keyrate: unsupported algorithm")
	errOther = errors.New("redisbucket: redis unavailable")
)

func TestErrorf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
		is   []error
	}{
		{wrap.Errorf("%w: %w: %s window", errA, errB, "log"),
			"keyrate: invalid limit: unsupported algorithm: log window", []error{errA, errB}},
		// A prefix said once is kept: another package's, or text that
		// is not an error operand.
		{wrap.Errorf("%w: %w", errOther, errA), "redisbucket: redis unavailable: keyrate: invalid limit", []error{errOther, errA}},
		{wrap.Errorf("%w: %s", errA, "keyrate: x"), "keyrate: invalid limit: keyrate: x", []error{errA}},
		// Deeper: the operand's own wrapped text is left as it is.
		{wrap.Errorf("%w: %w", errOther, fmt.Errorf("%w: no call sent", errors.New("redisbucket: circuit breaker open"))),
			"redisbucket: redis unavailable: circuit breaker open: no call sent", []error{errOther}},
		// Not a "name: " prefix: a sentence, a path.
		{wrap.Errorf("%w: %w", errA, errors.New("keyrate: bad")), "keyrate: invalid limit: bad", []error{errA}},
		{wrap.Errorf("%w: %w", errors.New("open a: b"), errors.New("open a: c")), "open a: b: open a: c", nil},
		{wrap.Errorf("%w: %w", errA, fs.ErrNotExist), "keyrate: invalid limit: file does not exist", []error{errA, fs.ErrNotExist}},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
		for _, target := range c.is {
			if !errors.Is(c.err, target) {
				t.Errorf("errors.Is(%q, %q) = false", c.err, target)
			}
		}
	}
}

// TestErrorfAs: errors.As finds a typed operand through the shortened
// error.
func TestErrorfAs(t *testing.T) {
	pe := &fs.PathError{Op: "open", Path: "x", Err: fs.ErrNotExist}
	err := wrap.Errorf("%w: %w: %w", errA, errB, pe)
	var got *fs.PathError
	if !errors.As(err, &got) || got != pe {
		t.Errorf("errors.As(%q) did not find the *fs.PathError", err)
	}
	if want := "keyrate: invalid limit: unsupported algorithm: open x: file does not exist"; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err, want)
	}
}
