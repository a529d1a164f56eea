package report

import (
	"fmt"
	"hash/fnv"
	"image/color"
	"io"
	"math"
	"strconv"
	"strings"

	"golang.org/x/perf/benchmath"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// chartFile returns the file name of workload wl's throughput chart:
// "throughput-<wl>.svg" for a name of up to maxChartName letters, digits
// and "-_.=+", as keyrate's workloads are named. Any other name (one
// with a character no file name may hold, or that another system
// would not take, or too long for a file name) has those characters
// replaced by "_", is cut to maxChartName bytes, and ends in a hash of
// the whole name, so that two workloads never share a chart.
func chartFile(wl string) string {
	safe := strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("-_.=+", r) {
			return r
		}
		return '_'
	}, wl)
	if safe != wl || len(safe) > maxChartName || wl == "" {
		h := fnv.New32a()
		h.Write([]byte(wl))
		safe = fmt.Sprintf("%s-%08x", safe[:min(len(safe), maxChartName)], h.Sum32())
	}
	return "throughput-" + safe + ".svg"
}

// maxChartName is the longest workload name a chart's file name holds.
const maxChartName = 64

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
// bounds of the median's 95% confidence interval; a median of fewer than
// six runs has none (see noInterval), and its point no error bar.
func subjectThroughput(s *Set, subj, wl string) (throughput, bool) {
	var t throughput
	for _, procs := range s.Procs {
		sum, ok := s.Summary(allow(subj, wl, procs, unitNs))
		if !ok || sum.Center <= 0 {
			continue
		}
		y := 1e3 / sum.Center
		t.XYs = append(t.XYs, plotter.XY{X: s.chartX(procs), Y: y})
		var bar struct{ Low, High float64 }
		if !noInterval(sum) {
			bar.Low, bar.High = y-1e3/sum.Hi, 1e3/sum.Lo-y
		}
		t.YErrors = append(t.YErrors, bar)
	}
	return t, len(t.XYs) > 0
}

// dodge is the x offset of the i-th subject's points: the subjects are
// spread, in order, over a third of the smallest gap between two -cpu
// values, centred on the value, so that equal medians with equal error
// bars (common where goroutines share a 2-core machine) are drawn side by
// side rather than over each other.
func (s *Set) dodge(i int) float64 {
	n := len(s.Subjects)
	if n < 2 {
		return 0
	}
	gap := 1.0
	for k := 1; k < len(s.Procs); k++ {
		gap = min(gap, s.chartX(s.Procs[k])-s.chartX(s.Procs[k-1]))
	}
	return (float64(i)/float64(n-1) - 0.5) * gap / 3
}

// noInterval reports whether a summary has no 95% interval: benchmath
// gives a median of fewer than six runs the interval (-∞, +∞), and a
// sample's low bound can be no time at all.
func noInterval(sum benchmath.Summary) bool {
	return math.IsInf(sum.Lo, 0) || math.IsInf(sum.Hi, 0) || sum.Lo <= 0
}

// chartLacksIntervals reports whether a point of wl's chart has no
// error bar (see noInterval).
func (s *Set) chartLacksIntervals(wl string) bool {
	for _, subj := range s.Subjects {
		for _, procs := range s.Procs {
			if sum, ok := s.Summary(allow(subj, wl, procs, unitNs)); ok && sum.Center > 0 && noInterval(sum) {
				return true
			}
		}
	}
	return false
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
	if s.chartLacksIntervals(wl) {
		p.Title.Text += ": no error bars (under 6 runs)"
	}
	p.X.Label.Text = "GOMAXPROCS (-cpu)"
	if c := s.Cores(); c > 0 {
		p.X.Label.Text += fmt.Sprintf("; %d CPUs", c)
	}
	p.Y.Label.Text = "million calls/s (median, 95% interval)"
	p.Y.Min = 0
	var ticks []plot.Tick
	for _, procs := range s.Procs {
		ticks = append(ticks, plot.Tick{Value: s.chartX(procs), Label: strconv.Itoa(procs)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	if n := len(s.Procs); n > 0 {
		p.X.Min = 0
		if s.manyCores() {
			p.X.Min = s.chartX(s.Procs[0]) - 0.25 // room for the dodge
			p.X.Label.Text += ", log scale"
		}
		last := s.chartX(s.Procs[n-1])
		p.X.Max = max(last*1.05, last+0.25) // room for the dodge
	}
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	longest := ""
	for i, subj := range s.Subjects {
		t, ok := subjectThroughput(s, subj, wl)
		if !ok {
			continue
		}
		for k := range t.XYs {
			t.XYs[k].X += s.dodge(i)
		}
		col, glyph, dashes := subjectStyle(i, subj)
		line, points, err := plotter.NewLinePoints(t)
		if err != nil {
			return err
		}
		line.Color, line.Dashes = col, dashes
		points.Color, points.Shape = col, glyph
		name := subj
		if subj == floor && s.manyCores() {
			// The ideal line: black and thicker than the others.
			line.Color, points.Color = color.Black, color.Black
			line.Width *= 2
			name = floor + " (ideal)"
		}
		bars, err := plotter.NewYErrorBars(t)
		if err != nil {
			return err
		}
		bars.Color = points.Color
		p.Add(bars, line, points)
		legend.Add(name, line, points)
		if legend.TextStyle.Rectangle(name).Max.X > legend.TextStyle.Rectangle(longest).Max.X {
			longest = name
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
