package report

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUpdateReadmeCRLF: in a README with CRLF line endings the block is
// rewritten with CRLF too: the "\r" after the begin marker is kept, and
// the paragraph's line ends in "\r\n", so that the file does not come
// out with mixed line endings.
func TestUpdateReadmeCRLF(t *testing.T) {
	in := "# p\r\n\r\n" + ReadmeBegin + "\r\nold\r\n" + ReadmeEnd + "\r\nafter\r\n"
	out, err := UpdateReadme([]byte(in), "new figures\n")
	require.NoError(t, err)
	assert.Equal(t, "# p\r\n\r\n"+ReadmeBegin+"\r\nnew figures\r\n"+ReadmeEnd+"\r\nafter\r\n", string(out))

	// LF stays LF.
	out, err = UpdateReadme([]byte("# p\n"+ReadmeBegin+"\nold\n"+ReadmeEnd+"\n"), "new figures\n")
	require.NoError(t, err)
	assert.Equal(t, "# p\n"+ReadmeBegin+"\nnew figures\n"+ReadmeEnd+"\n", string(out))
}

// TestUpdateReadmeMarkers: a README whose markers do not make exactly one
// block is an error naming the line of the offending marker; never a
// rewrite of the first of two blocks, leaving the other stale, nor one
// that swallows a second begin marker.
func TestUpdateReadmeMarkers(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"begin without end", "# p\n" + ReadmeBegin + "\nold\n", "line 2: the begin marker has no end marker after it"},
		{"end before begin", "# p\n" + ReadmeEnd + "\n" + ReadmeBegin + "\n", "line 2: an end marker before the begin marker"},
		{"no markers", "# p\n", "no begin marker"},
		{"two blocks", "# p\n" + ReadmeBegin + "\na\n" + ReadmeEnd + "\n" + ReadmeBegin + "\nb\n" + ReadmeEnd + "\n", "line 5: a second begin marker"},
		{"two begins", "# p\n" + ReadmeBegin + "\n" + ReadmeBegin + "\n" + ReadmeEnd + "\n", "line 3: a second begin marker"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := UpdateReadme([]byte(tc.in), "x")
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.False(t, strings.Contains(err.Error(), "\n"), "one line: %q", err)
		})
	}
}
