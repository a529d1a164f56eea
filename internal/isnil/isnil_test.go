package isnil_test

import (
	"io"
	"strings"
	"testing"

	"github.com/keyrate/keyrate/internal/isnil"
)

type ptrReader struct{}

func (*ptrReader) Read([]byte) (int, error) { return 0, io.EOF }

type sliceReader []byte

func (sliceReader) Read([]byte) (int, error) { return 0, io.EOF }

type mapReader map[int]int

func (mapReader) Read([]byte) (int, error) { return 0, io.EOF }

type funcReader func([]byte) (int, error)

func (f funcReader) Read(p []byte) (int, error) { return f(p) }

type chanReader chan int

func (chanReader) Read([]byte) (int, error) { return 0, io.EOF }

type valueReader struct{ n int }

func (valueReader) Read([]byte) (int, error) { return 0, io.EOF }

func TestIs(t *testing.T) {
	for _, c := range []struct {
		name string
		v    io.Reader
		want bool
	}{
		{"nil interface", nil, true},
		{"nil pointer", (*ptrReader)(nil), true},
		{"nil slice", sliceReader(nil), true},
		{"nil map", mapReader(nil), true},
		{"nil func", funcReader(nil), true},
		{"nil chan", chanReader(nil), true},
		{"pointer", &ptrReader{}, false},
		{"empty slice", sliceReader{}, false},
		{"map", mapReader{}, false},
		{"func", funcReader(func([]byte) (int, error) { return 0, nil }), false},
		{"chan", make(chanReader), false},
		{"struct value", valueReader{}, false},
		{"strings.Reader", strings.NewReader(""), false},
	} {
		if got := isnil.Is(c.v); got != c.want {
			t.Errorf("Is(%s) = %v, want %v", c.name, got, c.want)
		}
	}
	if !isnil.Is(nil) {
		t.Error("Is(nil) = false")
	}
}
