package report

import (
	"fmt"
	"image/color"
	"io"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// chartFile returns the file name of workload wl's throughput chart.
func chartFile(wl string) string { return "throughput-" + wl + ".svg" }

// palette holds the chart colours: the Okabe-Ito palette (distinct to
// readers with any common colour-vision deficiency) without its yellow,
// which is unreadable on white, then darker tones for an eighth subject
// on. Every subject also has its own marker (glyphShapes), so that no two
// lines are told apart by colour alone.
var palette = []color.Color{
	color.RGBA{0x00, 0x72, 0xb2, 0xff}, // blue
	color.RGBA{0xd5, 0x5e, 0x00, 0xff}, // vermillion
	color.RGBA{0x00, 0x9e, 0x73, 0xff}, // bluish green
	color.RGBA{0xcc, 0x79, 0xa7, 0xff}, // reddish purple
	color.RGBA{0xe6, 0x9f, 0x00, 0xff}, // orange
	color.RGBA{0x56, 0xb4, 0xe9, 0xff}, // sky blue
	color.RGBA{0x00, 0x00, 0x00, 0xff}, // black
	color.RGBA{0x80, 0x80, 0x80, 0xff}, // grey
	color.RGBA{0x8c, 0x2d, 0x04, 0xff}, // brown
	color.RGBA{0x54, 0x27, 0x88, 0xff}, // purple
}

// glyphShapes are the subjects' markers, in subject order.
var glyphShapes = []draw.GlyphDrawer{
	draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.CrossGlyph{},
	draw.PlusGlyph{}, draw.RingGlyph{}, draw.BoxGlyph{}, draw.PyramidGlyph{},
}

// subjectStyle returns the colour, marker and dashes of the i-th subject:
// the baselines (floor, xrate) are dashed, the stores solid.
func subjectStyle(i int, subj string) (color.Color, draw.GlyphDrawer, []vg.Length) {
	var dashes []vg.Length
	if subj == floor || subj == xrate {
		dashes = []vg.Length{vg.Points(5), vg.Points(3)}
	}
	return palette[i%len(palette)], glyphShapes[i%len(glyphShapes)], dashes
}

// throughput is one subject's chart points: millions of calls per second
// at each GOMAXPROCS, with the 95% interval of each as error bars.
type throughput struct {
	plotter.XYs
	plotter.YErrors
}

// subjectThroughput returns subj's points on wl, and false if it has none.
// A point is 10³ ÷ the median ns/op, and its error bar spans 10³ ÷ the
// bounds of the median's 95% confidence interval.
func subjectThroughput(s *Set, subj, wl string) (throughput, bool) {
	var t throughput
	for _, procs := range s.Procs {
		sum, ok := s.Summary(allow(subj, wl, procs, unitNs))
		if !ok || sum.Center <= 0 || sum.Lo <= 0 {
			continue
		}
		y := 1e3 / sum.Center
		t.XYs = append(t.XYs, plotter.XY{X: float64(procs), Y: y})
		t.YErrors = append(t.YErrors, struct{ Low, High float64 }{y - 1e3/sum.Hi, 1e3/sum.Lo - y})
	}
	return t, len(t.XYs) > 0
}

// Chart geometry: the plot's own size, and the legend's column to its
// right, sized to the longest name with room for a wider fallback font (a
// viewer without the SVG's font, Liberation, substitutes one), so that
// the legend is never drawn over the plot or clipped.
const (
	chartWidth  = 7 * vg.Inch
	chartHeight = 4.5 * vg.Inch
	legendSlack = 1.3 // room for the longest name over what the SVG's own font needs
)

// writeChart draws workload wl's throughput chart to w in format ("svg"):
// millions of calls per second (the reciprocal of the median ns/op, over
// all goroutines) against GOMAXPROCS, one line per subject, each point
// with its 95% interval as an error bar, and the legend in a column to the
// right of the plot.
func writeChart(w io.Writer, s *Set, wl, format string) error {
	p := plot.New()
	// Short texts: a viewer without the SVG's font substitutes a wider
	// one, and long texts then run off the canvas.
	p.Title.Text = "wl=" + wl
	p.X.Label.Text = "GOMAXPROCS (-cpu)"
	if c := s.Cores(); c > 0 {
		p.X.Label.Text += fmt.Sprintf("; %d CPUs", c)
	}
	p.Y.Label.Text = "million calls/s (median, 95% interval)"
	p.Y.Min = 0
	var ticks []plot.Tick
	for _, procs := range s.Procs {
		ticks = append(ticks, plot.Tick{Value: float64(procs), Label: strconv.Itoa(procs)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	if n := len(s.Procs); n > 0 {
		p.X.Min = 0
		p.X.Max = float64(s.Procs[n-1]) * 1.05
	}
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	longest := ""
	for i, subj := range s.Subjects {
		t, ok := subjectThroughput(s, subj, wl)
		if !ok {
			continue
		}
		col, glyph, dashes := subjectStyle(i, subj)
		line, points, err := plotter.NewLinePoints(t)
		if err != nil {
			return err
		}
		line.Color, line.Dashes = col, dashes
		points.Color, points.Shape = col, glyph
		bars, err := plotter.NewYErrorBars(t)
		if err != nil {
			return err
		}
		bars.Color = col
		p.Add(bars, line, points)
		legend.Add(subj, line, points)
		if legend.TextStyle.Rectangle(subj).Max.X > legend.TextStyle.Rectangle(longest).Max.X {
			longest = subj
		}
	}

	em := legend.TextStyle.Rectangle(" ").Max.X
	legendWidth := legend.ThumbnailWidth + 3*em + legend.TextStyle.Rectangle(longest).Max.X*legendSlack
	c, err := draw.NewFormattedCanvas(chartWidth+legendWidth, chartHeight, format)
	if err != nil {
		return err
	}
	dc := draw.New(c)
	p.Draw(draw.Crop(dc, 0, -legendWidth, 0, 0))
	legendArea := draw.Crop(dc, chartWidth+em, 0, 0, -vg.Points(20))
	legend.Draw(legendArea)
	_, err = c.WriteTo(w)
	return err
}
