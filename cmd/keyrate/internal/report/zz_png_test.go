package report

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	_ "gonum.org/v1/plot/vg/vgimg"
)

func TestZZPNG(t *testing.T) {
	src := os.Getenv("ZZ_SET")
	if src == "" {
		t.Skip()
	}
	s, err := Load(src)
	if err != nil {
		t.Fatal(err)
	}
	out := os.Getenv("ZZ_OUT")
	os.MkdirAll(out, 0o755)
	for _, wl := range s.Workloads {
		var buf bytes.Buffer
		if err := writeChart(&buf, s, wl, "png"); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(out, wl+".png"), buf.Bytes(), 0o644)
	}
}
