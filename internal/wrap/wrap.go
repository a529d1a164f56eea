// Package wrap builds errors that wrap several of one package's errors
// under a message that names the package once.
//
// Each of keyrate's error values names its package ("keyrate: invalid
// limit", "redisbucket: redis unavailable"), so fmt.Errorf("%w: %w: ...",
// keyrate.ErrInvalidLimit, keyrate.ErrUnsupportedAlgorithm) reads
// "keyrate: invalid limit: keyrate: unsupported algorithm: ...". Errorf
// wraps the same errors and reads "keyrate: invalid limit: unsupported
// algorithm: ...".
package wrap

import (
	"fmt"
	"slices"
	"strings"
)

// Errorf is fmt.Errorf, differing only in the message: the text of an
// error operand loses its leading "name: " when an earlier error operand's
// text began with the same one. errors.Is and errors.As see every %w
// operand, as with fmt.Errorf. It is for error paths: it costs a few
// allocations more than fmt.Errorf.
func Errorf(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	texts := make([]any, len(args))
	var seen []string
	shortened := false
	for i, a := range args {
		e, ok := a.(error)
		if !ok || e == nil {
			texts[i] = a
			continue
		}
		text := e.Error()
		if p := prefix(text); p != "" {
			if slices.Contains(seen, p) {
				text, shortened = text[len(p):], true
			} else {
				seen = append(seen, p)
			}
		}
		texts[i] = text
	}
	if !shortened {
		return err
	}
	return &wrapped{msg: fmt.Sprintf(strings.ReplaceAll(format, "%w", "%v"), texts...), err: err}
}

// prefix returns the "name: " that text begins with (a name being one
// word of letters, digits, '/', '.' or '_'), or "".
func prefix(text string) string {
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case c == ':':
			if i > 0 && i+1 < len(text) && text[i+1] == ' ' {
				return text[:i+2]
			}
			return ""
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '/', c == '.', c == '_':
		default:
			return ""
		}
	}
	return ""
}

// wrapped is Errorf's error: fmt.Errorf's, with a shorter message.
type wrapped struct {
	msg string
	err error // fmt.Errorf's: what Unwrap returns
}

func (w *wrapped) Error() string { return w.msg }

// Unwrap returns the %w operands.
func (w *wrapped) Unwrap() []error {
	switch u := w.err.(type) {
	case interface{ Unwrap() []error }:
		return u.Unwrap()
	case interface{ Unwrap() error }:
		return []error{u.Unwrap()}
	}
	return nil
}
