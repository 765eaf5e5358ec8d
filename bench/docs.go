package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// writeDocs writes the benchmarks page: every section's notes, its table
// and its chart, all from rep, the results file named source. chartsDir
// is where the charts are, as the page links them. earlier (nil for none)
// is the earlier run whose figures the charts draw beside rep's.
func writeDocs(path string, rep *report, earlier *earlierRun, source, chartsDir string, charts []chart) error {
	var b bytes.Buffer
	m, c := rep.Machine, rep.Config
	fmt.Fprintf(&b, "# Benchmarks\n\n")
	fmt.Fprintf(&b, "<!-- Written by the benchmark program from %s; do not edit by hand.\n", source)
	fmt.Fprintf(&b, "     Redraw with: ./bench.sh -redraw %s -->\n\n", strings.TrimPrefix(source, "bench/"))
	fmt.Fprintf(&b, "Every figure, table and chart on this page comes from one results file, `%s`: "+
		"the run of %s", source, chartTime(rep.Started))
	if c.Quick {
		fmt.Fprint(&b, " with `-quick`")
	}
	fmt.Fprintf(&b, ", on %s, %d cores (GOMAXPROCS %d), %s, %s %s/%s, redis-server %s, everything on loopback, "+
		"load average %s at the start.\n", m.CPU, m.Cores, m.GOMAXPROCS, m.Kernel, m.Go, m.GOOS, m.GOARCH, m.Redis, m.LoadAvg)
	if len(m.Modules) > 0 {
		fmt.Fprintf(&b, "Peers' modules: %s.\n", strings.Join(m.Modules, ", "))
	}
	fmt.Fprint(&b, `
`+"`./bench.sh`"+` runs the benchmark program (module `+"`bench/`"+`) against redis-server processes it
starts itself, writes `+"`bench/results/latest.json`"+`, and redraws the charts (`+"`docs/bench/*.svg`"+`)
and this page from it. `+"`./bench.sh -redraw results/latest.json`"+` redraws them from a results
file (the path is relative to `+"`bench/`"+`) without running anything; `+"`./bench.sh -h`"+` lists
the flags.

The timed scenarios alternate the implementations in interleaved rounds, so that a change
in the machine's load falls on all of them alike: compare the implementations within one
run; absolute figures on a shared machine vary from run to run.

`)
	if hasNoGrant(rep) {
		fmt.Fprint(&b, `Grant on release (a release writes the next waiter's hold itself) is measured before and
after in the same run: the "no-grant" implementations are relock without it
(`+"`rlock.WithoutGrantOnRelease()`"+`), in the same interleaved rounds as relock with it; the charts
of scenarios 3, 4a and 4c draw each "before" row just above its "after" row.
`)
		if earlier != nil {
			fmt.Fprintf(&b, "Those charts also draw relock's and relock/wake-one's rows of an earlier run, `%s` "+
				"(the run of %s), labelled \"(%s)\": figures of another run, whose machine load may have differed.\n",
				earlier.source, chartTime(earlier.rep.Started), earlier.label())
		}
		fmt.Fprintln(&b)
	}
	if len(rep.Peers) > 0 {
		fmt.Fprint(&b, "## Implementations\n\n| name | settings |\n| --- | --- |\n")
		for _, p := range rep.Peers {
			fmt.Fprintf(&b, "| %s | %s |\n", cell(p.Name), cell(p.Settings))
		}
		fmt.Fprintln(&b)
	}
	if len(rep.Goals) > 0 {
		fmt.Fprint(&b, "## Goals\n\n| goal | target | measured | met |\n| --- | --- | --- | --- |\n")
		for _, g := range rep.Goals {
			met := "yes"
			if !g.Met {
				met = "**no**"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", cell(g.Name), cell(g.Target), cell(g.Got), met)
		}
		fmt.Fprintln(&b)
	}
	byID := map[string][]chart{}
	for _, ch := range charts {
		byID[ch.Section] = append(byID[ch.Section], ch)
	}
	// The scaling chart goes after the last of the sections it draws.
	scalingAfter := ""
	for _, s := range rep.Sections {
		switch s.ID {
		case "contention", "clients16", "waiters100":
			scalingAfter = s.ID
		}
	}
	for _, s := range rep.Sections {
		fmt.Fprintf(&b, "## %s\n\n", s.Title)
		if s.Skipped != "" {
			fmt.Fprintf(&b, "Skipped: %s\n\n", s.Skipped)
			continue
		}
		for _, ch := range byID[s.ID] {
			writeChartLink(&b, chartsDir, ch)
		}
		cols, rows, err := sectionTable(s)
		if err != nil {
			return err
		}
		if len(rows) > 0 {
			writeTable(&b, cols, rows)
		}
		if len(s.Notes) > 0 {
			fmt.Fprintln(&b)
			for _, n := range s.Notes {
				if strings.HasPrefix(n, "  ") {
					// A note's second line.
					fmt.Fprintf(&b, "  %s\n", strings.TrimSpace(n))
					continue
				}
				fmt.Fprintf(&b, "- %s\n", n)
			}
		}
		fmt.Fprintln(&b)
		if s.ID == scalingAfter {
			for _, ch := range byID["scaling"] {
				fmt.Fprintf(&b, "### Scenarios 3, 4a and 4b together\n\n")
				writeChartLink(&b, chartsDir, ch)
				fmt.Fprintln(&b, "Scenario 3 spreads its 16 contenders over one client, 4a over 16 clients, "+
					"both with 1ms holds; 4b has 100 clients that release at once.")
				fmt.Fprintln(&b)
			}
		}
	}
	if old, err := os.ReadFile(path); err == nil {
		if i := bytes.Index(old, []byte(handMark)); i >= 0 {
			b.Write(old[i:])
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// handMark starts the end of the page that is written by hand
// (measurements made outside the benchmark program, by counting tests):
// the program keeps it as it is, from the mark on.
const handMark = "<!-- Written by hand from here on: the benchmark program keeps this part as it is. -->"

func writeChartLink(b *bytes.Buffer, dir string, ch chart) {
	fmt.Fprintf(b, "![%s](%s)\n\n", cell(ch.Alt), filepath.ToSlash(filepath.Join(dir, ch.File)))
}

// writeTable writes a markdown table, numbers aligned right.
func writeTable(b *bytes.Buffer, cols []string, rows [][]string) {
	fmt.Fprintf(b, "| %s |\n|", strings.Join(cellAll(cols), " | "))
	for i := range cols {
		if i == 0 {
			fmt.Fprint(b, " --- |")
		} else {
			fmt.Fprint(b, " ---: |")
		}
	}
	fmt.Fprintln(b)
	for _, row := range rows {
		fmt.Fprintf(b, "| %s |\n", strings.Join(cellAll(row), " | "))
	}
}

func cellAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = cell(s)
	}
	return out
}

// cell escapes what would break a markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

// hasNoGrant reports whether rep has a no-grant ("before") row in a
// contended section.
func hasNoGrant(rep *report) bool {
	for _, s := range rep.Sections {
		switch s.ID {
		case "contention", "clients16", "waiters100", "fair":
			rows, err := decodeResults[[]*lockRow](s)
			if err != nil {
				continue
			}
			for _, r := range rows {
				if r != nil && isNoGrant(r.Impl) {
					return true
				}
			}
		}
	}
	return false
}
