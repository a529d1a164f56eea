package report

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// maxLine is the longest line, its newline included, that benchfmt's
// reader takes: it scans lines with a bufio.Scanner of the default
// limit, and stops at a longer one with "token too long", the rest of
// the file unread.
const maxLine = bufio.MaxScanTokenSize

// maxSkip is the longest line lineLimiter skips: a longer one is no
// benchmark output (an endless stream such as /dev/zero, a binary file),
// and ends the read with an error.
const maxSkip = 16 << 20

// errEndless is lineLimiter's error for a line longer than maxSkip.
type errEndless struct{ line int }

func (e *errEndless) Error() string {
	return fmt.Sprintf("a line of more than %d bytes: not benchmark output", maxSkip)
}

// longLine is a line that lineLimiter left out: its number and length.
type longLine struct {
	line  int
	bytes int
	start string // its first bytes, for the warning
}

// lineLimiter passes its input through, but for each line longer than
// maxLine, which it replaces by an empty line, so that benchfmt reads on
// past it and numbers the lines after it as the file does. It holds at
// most maxLine bytes of a line, however long.
type lineLimiter struct {
	r       *bufio.Reader
	line    int    // lines read so far
	pending []byte // the rest of the current line, in r's buffer
	err     error  // r's error, returned once pending is passed on
	long    []longLine
}

func newLineLimiter(r io.Reader) *lineLimiter {
	return &lineLimiter{r: bufio.NewReaderSize(r, maxLine)}
}

var newline = []byte("\n")

func (l *lineLimiter) Read(p []byte) (int, error) {
	for len(l.pending) == 0 {
		if l.err != nil {
			return 0, l.err
		}
		chunk, err := l.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			ll := longLine{line: l.line + 1, start: string(chunk[:min(len(chunk), 40)])}
			for errors.Is(err, bufio.ErrBufferFull) {
				ll.bytes += len(chunk)
				if ll.bytes > maxSkip {
					l.err = &errEndless{ll.line}
					return 0, l.err
				}
				chunk, err = l.r.ReadSlice('\n')
			}
			ll.bytes += len(chunk)
			l.long = append(l.long, ll)
			chunk = newline
		}
		if len(chunk) > 0 {
			l.line++
		}
		l.pending, l.err = chunk, err
	}
	n := copy(p, l.pending)
	l.pending = l.pending[n:]
	return n, nil
}
