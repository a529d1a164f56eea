package report

import (
	"fmt"
	"io"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// chartFile returns the file name of workload wl's throughput chart.
func chartFile(wl string) string { return "throughput-" + wl + ".svg" }

// writeChart draws workload wl's throughput chart to w in format ("svg"): millions of
// calls per second (the reciprocal of the median ns/op, over all goroutines)
// against GOMAXPROCS, one line per subject.
func writeChart(w io.Writer, s *Set, wl, format string) error {
	p := plot.New()
	// Short texts: a viewer without the SVG's font (Liberation) substitutes
	// a wider one, and long texts then run off the canvas.
	p.Title.Text = "wl=" + wl
	p.X.Label.Text = "GOMAXPROCS (-cpu)"
	if c := s.Cores(); c > 0 {
		p.X.Label.Text += fmt.Sprintf("; %d CPUs", c)
	}
	p.Y.Label.Text = "million calls/s (median)"
	p.Y.Min = 0
	p.Legend.Top = true             // at the right, past the last core count (see X.Max)
	p.Legend.XOffs = -0.4 * vg.Inch // and clear of the edge in a wider fallback font
	var ticks []plot.Tick
	for _, procs := range s.Procs {
		ticks = append(ticks, plot.Tick{Value: float64(procs), Label: strconv.Itoa(procs)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	if n := len(s.Procs); n > 0 {
		p.X.Min = 0
		p.X.Max = float64(s.Procs[n-1]) * 2 // room for the legend
	}
	var lines []any
	for _, subj := range s.Subjects {
		var xys plotter.XYs
		for _, procs := range s.Procs {
			if ns, ok := s.Median(allow(subj, wl, procs, unitNs)); ok && ns > 0 {
				xys = append(xys, plotter.XY{X: float64(procs), Y: 1e3 / ns})
			}
		}
		if len(xys) > 0 {
			lines = append(lines, subj, xys)
		}
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return err
	}
	wt, err := p.WriterTo(8*vg.Inch, 4.5*vg.Inch, format)
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
}
