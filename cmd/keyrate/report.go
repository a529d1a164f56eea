package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/keyrate/keyrate/cmd/keyrate/internal/report"
)

func init() {
	commands["report"] = command{
		run: func(args []string, _ io.Reader, stdout, stderr io.Writer) int {
			return runReport(args, stdout, stderr)
		},
		summary: "write the benchmark comparison report from one or two result sets",
	}
}

// reportHelp is the text of "keyrate report -h", before the flag list.
const reportHelp = `usage: keyrate report [-o dir] [-readme file] results [after]

Report reads the raw output of keyrate's benchmarks (package bench) and
writes a markdown report, README.md, and one SVG throughput chart per
workload into dir: medians with 95% intervals, each store's ratio to the
floor and x/time/rate baselines, allocations, memory and GC time,
httplimit against other middlewares, the performance targets checked, and
a summary of which store to pick. Where the results hold three or more
core counts within the machine's CPUs, it adds which store to pick over
each range of core counts and each subject's scaling from 1 to N cores
against the floor's, and its charts put the core counts on a log₂ axis.
It replaces a README.md in dir only if that is a report it wrote before.
Lines of the results it skips are listed in the report and counted on
stderr.

results is a directory holding bench.txt and machine.txt, as "make bench"
writes them under bench/results/, or a raw output file. A directory may
also hold peers.txt, an outside harness's BenchmarkAllow/peer=<library>/
wl=<workload> rows: the report shows them in a section of their own, with
a chart per workload. Given a second set,
after, the report is on after and adds before/after deltas with p-values.

With -readme, the block of file between the lines
` + report.ReadmeBegin + `
and
` + report.ReadmeEnd + `
is replaced by a paragraph of the report's figures that links to it, so
that a README quotes only numbers the report computed.

`

// runReport is the report subcommand. It returns 0 on success, 1 if
// writing the report fails, and 2 for a usage error or unreadable results.
func runReport(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("keyrate report", flag.ContinueOnError)
	out := fs.String("o", "docs/report", "the `dir`ectory to write the report into")
	readme := fs.String("readme", "", "a markdown `file` whose marked block to replace with the report's figures")
	if err := parseFlags(fs, args, reportHelp, stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "keyrate report: %v\n", err)
		return 2
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		fmt.Fprintf(stderr, "keyrate report: want one or two result sets, got %d; run 'keyrate report -h'\n", fs.NArg())
		return 2
	}
	var sets []*report.Set
	for _, path := range fs.Args() {
		s, err := report.Load(path)
		if err != nil {
			fmt.Fprintf(stderr, "keyrate report: %v\n", err)
			return 2
		}
		if n := len(s.Warnings); n > 0 { // the report lists them all
			fmt.Fprintf(stderr, "keyrate report: %s: skipped %d %s (see the report's \"Lines skipped\"), the first: %s\n",
				path, n, plural(n, "line"), s.Warnings[0])
		}
		sets = append(sets, s)
	}
	if err := report.Write(*out, sets...); err != nil {
		fmt.Fprintf(stderr, "keyrate report: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s\n", filepath.Join(*out, report.ReportFile))
	if *readme != "" {
		if err := updateReadme(*readme, *out, sets[len(sets)-1]); err != nil {
			fmt.Fprintf(stderr, "keyrate report: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "updated %s\n", *readme)
	}
	return 0
}

// updateReadme replaces the marked block of the markdown file readme with
// the brief of s, linking to its report in dir.
func updateReadme(readme, dir string, s *report.Set) error {
	// Rel takes two absolute paths or two relative ones: -o and -readme
	// may be one of each.
	absReadme, err := filepath.Abs(readme)
	if err != nil {
		return err
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	link, err := filepath.Rel(filepath.Dir(absReadme), filepath.Join(absDir, report.ReportFile))
	if err != nil {
		return err
	}
	old, err := os.ReadFile(readme)
	if err != nil {
		return err
	}
	var brief strings.Builder
	report.Brief(&brief, filepath.ToSlash(link), s)
	updated, err := report.UpdateReadme(old, brief.String())
	if err != nil {
		return fmt.Errorf("%s: %w", readme, err)
	}
	return os.WriteFile(readme, updated, 0o644)
}
