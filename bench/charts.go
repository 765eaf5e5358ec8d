package main

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The charts of a results file: one SVG per scenario that has peers or
// rows to compare, each saying which run and machine its figures are from.

// chart is one SVG written by writeCharts.
type chart struct {
	Section string // the section it draws ("scaling" draws 3, 4a and 4b)
	File    string // its file name in the charts directory
	Alt     string // what it shows, for the docs page
}

// chartFont is the font of every text in the charts.
var chartFont = font.Font{Typeface: "Liberation", Variant: "Sans"}

// earlierRun is an earlier results file (-before) whose figures the charts
// draw beside rep's.
type earlierRun struct {
	rep    *report
	source string // its name as the charts cite it
}

// label is how the charts name the rows of the earlier run.
func (e *earlierRun) label() string { return "run " + e.rep.Started.UTC().Format("2006-01-02") }

// rows are the earlier run's rows of section id (nil if it has none).
func (e *earlierRun) rows(id string) ([]*lockRow, error) {
	if e == nil {
		return nil, nil
	}
	s := findSection(e.rep, id)
	if s == nil || s.Skipped != "" {
		return nil, nil
	}
	return decodeResults[[]*lockRow](s)
}

// writeCharts draws the charts of rep into dir and returns them in the
// order of the sections. source is the results file's name as the charts
// cite it. The charts of the contended sections draw relock's figures of
// earlier (nil for none) beside rep's.
func writeCharts(rep *report, earlier *earlierRun, source, dir string) ([]chart, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	plot.DefaultFont = chartFont
	foot := footer(rep, source)
	var charts []chart
	add := func(c chart, title string, extra []string, legend *plot.Legend, panels ...*plot.Plot) error {
		if len(panels) == 0 {
			return nil
		}
		if err := saveChart(filepath.Join(dir, c.File), title, append(slices.Clip(foot), extra...), panels, legend); err != nil {
			return fmt.Errorf("chart %s: %w", c.File, err)
		}
		charts = append(charts, c)
		return nil
	}
	for _, s := range rep.Sections {
		if s.Skipped != "" || s.Results == nil {
			continue
		}
		var err error
		switch s.ID {
		case "uncontended", "throughput":
			rows, derr := decodeResults[[]*lockRow](s)
			if derr != nil {
				return nil, derr
			}
			err = add(chart{s.ID, s.ID + ".svg", s.Title + ": lock+unlock per second, and its latency"}, s.Title, nil, nil,
				loopPanels(rows)...)
		case "contention", "clients16", "waiters100", "fair":
			rows, derr := decodeResults[[]*lockRow](s)
			if derr != nil {
				return nil, derr
			}
			old, derr := earlier.rows(s.ID)
			if derr != nil {
				return nil, fmt.Errorf("-before: %w", derr)
			}
			rows, pairs, olds := beforeAfter(rows, old, earlier)
			alt := s.Title + ": acquisitions per second, and hand-off latency"
			var extra []string
			if pairs > 0 {
				alt += `, before grant on release ("no-grant", "before") and with it ("after")`
			}
			if olds > 0 {
				alt += fmt.Sprintf(", and relock's figures of the %s", earlier.label())
				extra = append(extra, fmt.Sprintf(`rows "(%s)": the same implementation in %s, run of %s (another run: the load of the machine may differ)`,
					earlier.label(), earlier.source, chartTime(earlier.rep.Started)))
			}
			err = add(chart{s.ID, s.ID + ".svg", alt}, s.Title, extra, nil, contendedPanels(rows)...)
		case "redlock":
			res, derr := decodeResults[*redlockResult](s)
			if derr != nil {
				return nil, derr
			}
			if res != nil {
				err = add(chart{s.ID, s.ID + ".svg", s.Title + ": latency, client CPU and allocations per lock+unlock"}, s.Title, nil, nil,
					redlockPanels(res.Rows)...)
			}
		case "rwlock":
			rows, derr := decodeResults[[]*syncRow](s)
			if derr != nil {
				return nil, derr
			}
			err = add(chart{s.ID, s.ID + ".svg", s.Title + ": operations per second, and acquisition latency"}, s.Title, nil, nil,
				rwPanels(rows)...)
		case "permits":
			rows, derr := decodeResults[[]*syncRow](s)
			if derr != nil {
				return nil, derr
			}
			err = add(chart{s.ID, s.ID + ".svg", s.Title + ": hand-offs per second, and hand-off latency"}, s.Title, nil, nil,
				permitsPanels(rows)...)
		}
		if err != nil {
			return nil, err
		}
	}
	panels, legend, err := scalingPanels(rep)
	if err != nil {
		return nil, err
	}
	if err := add(chart{"scaling", "scaling.svg",
		"How each implementation fares as its contenders move from one client to 16 and 100 separate clients"},
		"One key, from one client to separate clients (scenarios 3, 4a, 4b)", nil, legend, panels...); err != nil {
		return nil, err
	}
	return charts, nil
}

// footer says which run the figures are from, on what.
func footer(rep *report, source string) []string {
	m, c := rep.Machine, rep.Config
	run := fmt.Sprintf("run of %s", rep.Started.UTC().Format("2006-01-02 15:04 MST"))
	if c.Quick {
		run += " (-quick)"
	}
	if c.Duration > 0 {
		run += fmt.Sprintf(", %v per implementation in %d interleaved rounds", c.Duration, c.Rounds)
	}
	return []string{
		fmt.Sprintf("%s; figures from %s", run, source),
		fmt.Sprintf("%s, %d cores (GOMAXPROCS %d), %s, %s %s/%s, redis-server %s on loopback, load average %s at start",
			m.CPU, m.Cores, m.GOMAXPROCS, m.Kernel, m.Go, m.GOOS, m.GOARCH, m.Redis, m.LoadAvg),
	}
}

// ---- the panels of each kind of section ----

// kept returns the rows for which keep holds, in their order, and their
// names.
func kept[T any](rows []T, name func(T) string, keep func(T) bool) ([]T, []string) {
	var out []T
	var names []string
	for _, r := range rows {
		if keep(r) {
			out = append(out, r)
			names = append(names, name(r))
		}
	}
	return out, names
}

func lockName(r *lockRow) string { return r.Impl }
func syncName(r *syncRow) string { return r.Impl }

// pluck is one figure of every row.
func pluck[T any](rows []T, f func(T) float64) []float64 {
	out := make([]float64, len(rows))
	for i, r := range rows {
		out[i] = f(r)
	}
	return out
}

// rateAndLatency are the two panels of most charts: a rate per row, and
// two latencies per row (p50 and p99, or read and write) on a log scale.
func rateAndLatency(rateTitle string, names []string, rate []float64,
	latTitle string, latNames []string, lat, pale []float64) []*plot.Plot {
	if len(names) == 0 {
		return nil
	}
	panels := []*plot.Plot{barPanel(rateTitle, names, linear, series{values: rate, label: fmtRateLabel})}
	if len(latNames) > 0 {
		panels = append(panels, barPanel(latTitle, latNames, logUs,
			series{values: lat, label: fmtUsLabel}, series{values: pale, label: fmtUsLabel, pale: true}))
	}
	return panels
}

func loopPanels(rows []*lockRow) []*plot.Plot {
	rows, names := kept(rows, lockName, func(r *lockRow) bool { return r != nil && r.Ops > 0 })
	return rateAndLatency("lock+unlock per second (higher is better)", names, pluck(rows, func(r *lockRow) float64 { return r.OpsPerSec }),
		"latency of lock+unlock: p50, p99 pale (lower is better)", names,
		pluck(rows, func(r *lockRow) float64 { return r.P50us }), pluck(rows, func(r *lockRow) float64 { return r.P99us }))
}

// The "before" of an implementation is its no-grant row: its name with
// "/no-grant" after the implementation ("relock/no-grant" for "relock",
// "relock fair/no-grant, 1 client" for "relock fair, 1 client").
const noGrantSuffix = "/no-grant"

// isNoGrant reports whether impl is a "before" row.
func isNoGrant(impl string) bool { return strings.Contains(impl, noGrantSuffix) }

// noGrantOf is the name of impl's "before" row.
func noGrantOf(impl string) string {
	if i := strings.Index(impl, ", "); i >= 0 {
		return impl[:i] + noGrantSuffix + impl[i:]
	}
	return impl + noGrantSuffix
}

// beforeAfter orders rows for a chart: each row that has a no-grant row
// beside it comes right after it, the two labelled "(before)" and
// "(after)"; and before them, the same implementation's row of the
// earlier run (old, of the same section), labelled with that run, for
// relock and relock/wake-one. It returns the rows, how many before/after
// pairs it found and how many rows of the earlier run it put in.
func beforeAfter(rows, old []*lockRow, earlier *earlierRun) (out []*lockRow, pairs, olds int) {
	named := map[string]*lockRow{}
	for _, r := range rows {
		if r != nil && !r.Reference {
			named[r.Impl] = r
		}
	}
	labelled := func(r *lockRow, label string) *lockRow {
		c := *r
		c.Impl = label
		return &c
	}
	for _, r := range rows {
		if r == nil {
			continue
		}
		if r.Reference {
			out = append(out, r)
			continue
		}
		if isNoGrant(r.Impl) && named[strings.Replace(r.Impl, noGrantSuffix, "", 1)] != nil {
			continue // drawn just before its "after" row
		}
		if r.Impl == "relock" || r.Impl == "relock/wake-one" {
			if o := find(old, r.Impl); o != nil && o.Ops > 0 {
				out = append(out, labelled(o, fmt.Sprintf("%s (%s)", r.Impl, earlier.label())))
				olds++
			}
		}
		if ng := named[noGrantOf(r.Impl)]; ng != nil {
			out = append(out, labelled(ng, ng.Impl+" (before)"), labelled(r, r.Impl+" (after)"))
			pairs++
			continue
		}
		out = append(out, r)
	}
	return out, pairs, olds
}

func contendedPanels(rows []*lockRow) []*plot.Plot {
	measured, names := kept(rows, lockName, func(r *lockRow) bool { return r != nil && r.Ops > 0 })
	// The hand-off panel has the limit's reference row too.
	handed, hnames := kept(rows, lockName, func(r *lockRow) bool { return r != nil && r.HandoffP50us > 0 })
	for i, r := range handed {
		if r.Reference {
			hnames[i] = r.Impl + " (2 round trips)"
		}
	}
	return rateAndLatency("acquisitions per second (higher is better)", names, pluck(measured, func(r *lockRow) float64 { return r.OpsPerSec }),
		"hand-off latency: p50, p99 pale (lower is better)", hnames,
		pluck(handed, func(r *lockRow) float64 { return r.HandoffP50us }), pluck(handed, func(r *lockRow) float64 { return r.HandoffP99us }))
}

func redlockPanels(rows []*lockRow) []*plot.Plot {
	rows, names := kept(rows, lockName, func(r *lockRow) bool { return r != nil && r.Ops > 0 })
	if len(rows) == 0 {
		return nil
	}
	return []*plot.Plot{
		barPanel("latency of lock+unlock: p50, p99 pale", names, logUs,
			series{values: pluck(rows, func(r *lockRow) float64 { return r.P50us }), label: fmtUsLabel},
			series{values: pluck(rows, func(r *lockRow) float64 { return r.P99us }), label: fmtUsLabel, pale: true}),
		barPanel("client CPU per lock+unlock (µs)", names, linear,
			series{values: pluck(rows, func(r *lockRow) float64 { return r.ClientCPUus }), label: fmtUsLabel}),
		barPanel("allocations per lock+unlock", names, linear,
			series{values: pluck(rows, func(r *lockRow) float64 { return r.AllocsPerOp }), label: func(v float64) string { return fmt.Sprintf("%.0f", v) }}),
	}
}

func rwPanels(rows []*syncRow) []*plot.Plot {
	rows, names := kept(rows, syncName, func(r *syncRow) bool { return r != nil && r.Ops > 0 })
	return rateAndLatency("operations per second (higher is better)", names, pluck(rows, func(r *syncRow) float64 { return r.OpsPerSec }),
		"p50 wait for a hold: read, write pale", names,
		pluck(rows, func(r *syncRow) float64 { return r.ReadP50us }), pluck(rows, func(r *syncRow) float64 { return r.WriteP50us }))
}

func permitsPanels(rows []*syncRow) []*plot.Plot {
	rows, names := kept(rows, syncName, func(r *syncRow) bool { return r != nil && r.Ops > 0 })
	return rateAndLatency("hand-offs per second (higher is better)", names, pluck(rows, func(r *syncRow) float64 { return r.OpsPerSec }),
		"hand-off latency: p50, p99 pale", names,
		pluck(rows, func(r *syncRow) float64 { return r.HandoffP50us }), pluck(rows, func(r *syncRow) float64 { return r.HandoffP99us }))
}

// scalingPanels draw, for each implementation in scenarios 3, 4a and 4b,
// its acquisitions per second and its hand-off p50 against the number of
// clients its contenders were spread over; the legend goes beside them.
func scalingPanels(rep *report) ([]*plot.Plot, *plot.Legend, error) {
	type point struct {
		clients   float64
		rate, p50 float64
	}
	lines := map[string][]point{}
	var order []string
	var xs []plot.Tick
	for _, id := range []string{"contention", "clients16", "waiters100"} {
		s := findSection(rep, id)
		if s == nil || s.Skipped != "" {
			continue
		}
		rows, err := decodeResults[[]*lockRow](s)
		if err != nil {
			return nil, nil, err
		}
		for _, r := range rows {
			if r == nil || r.Reference || r.Ops == 0 || r.Clients == 0 {
				continue
			}
			if _, ok := lines[r.Impl]; !ok {
				order = append(order, r.Impl)
			}
			lines[r.Impl] = append(lines[r.Impl], point{float64(r.Clients), r.OpsPerSec, r.HandoffP50us})
			x := float64(r.Clients)
			if !slices.ContainsFunc(xs, func(t plot.Tick) bool { return t.Value == x }) {
				xs = append(xs, plot.Tick{Value: x, Label: clientsLabel(s.ID, r)})
			}
		}
	}
	if len(order) == 0 {
		return nil, nil, nil
	}
	// Each no-grant ("before") line next to its implementation's.
	for _, impl := range slices.Clone(order) {
		if !isNoGrant(impl) {
			continue
		}
		grant := strings.Replace(impl, noGrantSuffix, "", 1)
		if j := slices.Index(order, grant); j >= 0 {
			order = slices.Delete(order, slices.Index(order, impl), slices.Index(order, impl)+1)
			j = slices.Index(order, grant)
			order = slices.Insert(order, j+1, impl)
		}
	}
	rate := newPlot("acquisitions per second (log scale)")
	p50 := newPlot("hand-off p50 (log scale; lower is better)")
	for _, p := range []*plot.Plot{rate, p50} {
		p.X.Label.Text = "clients"
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.ConstantTicks(xs)
		p.Y.Scale = plot.LogScale{}
	}
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.TextStyle.Font = font.From(chartFont, 8)
	rate.Y.Tick.Marker = labelledLog{fmtRateLabel}
	p50.Y.Tick.Marker = labelledLog{fmtUsLabel}
	for _, impl := range order {
		pts := lines[impl]
		var rxy, pxy plotter.XYs
		for _, pt := range pts {
			if pt.rate > 0 {
				rxy = append(rxy, plotter.XY{X: pt.clients, Y: pt.rate})
			}
			if pt.p50 > 0 {
				pxy = append(pxy, plotter.XY{X: pt.clients, Y: pt.p50})
			}
		}
		for _, c := range []struct {
			p   *plot.Plot
			xys plotter.XYs
		}{{rate, rxy}, {p50, pxy}} {
			if len(c.xys) == 0 {
				continue
			}
			l, s, err := plotter.NewLinePoints(c.xys)
			if err != nil {
				return nil, nil, err
			}
			l.Color, s.Color = implColor(impl), implColor(impl)
			l.Width = vg.Points(1.5)
			l.Dashes = implDashes(impl)
			s.Shape = draw.CircleGlyph{}
			s.Radius = vg.Points(2.5)
			c.p.Add(l, s)
		}
		legend.Add(impl, legendLine(impl))
	}
	for _, p := range []*plot.Plot{rate, p50} {
		pad(p)
	}
	return []*plot.Plot{rate, p50}, &legend, nil
}

// clientsLabel names a point of the scaling chart's x axis.
func clientsLabel(id string, r *lockRow) string {
	if id == "waiters100" {
		return fmt.Sprintf("%d (no hold)", r.Clients)
	}
	if r.Clients == 1 {
		return fmt.Sprintf("1 (%d goroutines)", r.Goroutines)
	}
	return fmt.Sprint(r.Clients)
}

func findSection(rep *report, id string) *section {
	for _, s := range rep.Sections {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// ---- drawing ----

// series is one bar per row of a panel; a panel draws its series side by
// side within each row.
type series struct {
	values []float64
	label  func(float64) string
	pale   bool
}

type scale int

const (
	linear scale = iota
	logUs        // log scale, values in microseconds
)

func newPlot(title string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = 10
	p.Title.Padding = vg.Points(6)
	p.X.Tick.Label.Font.Size = 8
	p.Y.Tick.Label.Font.Size = 8
	p.X.Label.TextStyle.Font.Size = 9
	return p
}

// barPanel is a horizontal bar chart, one row per name (the first at the
// top), each value written at the end of its bar.
func barPanel(title string, names []string, sc scale, ss ...series) *plot.Plot {
	p := newPlot(title)
	n := len(names)
	rev := make([]string, n)
	for i, name := range names {
		rev[n-1-i] = name
	}
	p.NominalY(rev...)
	p.Y.Tick.Label.Font.Size = 9
	lo, hi := math.Inf(1), 0.0
	for _, s := range ss {
		for _, v := range s.values {
			if v > 0 {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	if hi == 0 {
		lo, hi = 1, 10
	}
	base := 0.0
	switch sc {
	case logUs:
		base = niceBelow(lo / 2)
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = labelledLog{fmtUsLabel}
		p.X.Min, p.X.Max = base, hi*2.5
	default:
		p.X.Tick.Marker = labelledTicks{ss[0].label}
		p.X.Min, p.X.Max = 0, hi*1.3
	}
	for k, s := range ss {
		p.Add(&bars{names: names, s: s, slot: k, slots: len(ss), base: base})
	}
	p.Y.Min, p.Y.Max = -0.6, float64(n)-0.4
	return p
}

// niceBelow is the largest 1, 2 or 5 times a power of ten not above x.
func niceBelow(x float64) float64 {
	p := math.Pow10(int(math.Floor(math.Log10(x))))
	for _, m := range []float64{5, 2, 1} {
		if m*p <= x {
			return m * p
		}
	}
	return p
}

// pad leaves room around a line chart's points.
func pad(p *plot.Plot) {
	p.X.Min, p.X.Max = p.X.Min/1.6, p.X.Max*1.6
	p.Y.Min, p.Y.Max = p.Y.Min/2, p.Y.Max*2
}

// bars draws one series of a barPanel.
type bars struct {
	names       []string
	s           series
	slot, slots int
	base        float64
}

func (b *bars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	n := len(b.names)
	if n == 0 {
		return
	}
	rowH := trY(1) - trY(0)
	if n == 1 {
		rowH = (c.Max.Y - c.Min.Y) / 2
	}
	thick := rowH * 0.8 / vg.Length(b.slots)
	sty := draw.TextStyle{Color: color.Black, Font: font.From(chartFont, 7), XAlign: draw.XLeft, YAlign: draw.YCenter,
		Handler: p.TextHandler}
	for i, v := range b.s.values {
		if v <= 0 || i >= n {
			continue
		}
		y := trY(float64(n - 1 - i))
		top := y + rowH*0.4 - vg.Length(b.slot)*thick
		x0, x1 := trX(b.base), trX(v)
		clr := implColor(b.names[i])
		if b.s.pale {
			clr = paler(clr)
		}
		c.FillPolygon(clr, []vg.Point{{X: x0, Y: top}, {X: x1, Y: top}, {X: x1, Y: top - thick}, {X: x0, Y: top - thick}})
		c.FillText(sty, vg.Point{X: x1 + vg.Points(2), Y: top - thick/2 + vg.Points(0.5)}, b.s.label(v))
	}
}

func (b *bars) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = b.base, b.base
	for _, v := range b.s.values {
		xmax = max(xmax, v)
	}
	return xmin, xmax, -0.5, float64(len(b.names)) - 0.5
}

// labelledTicks are the default ticks, labelled by label.
type labelledTicks struct{ label func(float64) string }

func (t labelledTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = t.label(ticks[i].Value)
		}
	}
	return ticks
}

// labelledLog are log-scale ticks, labelled by label: every power of ten,
// and 2 and 5 times it too when the axis spans less than two powers.
type labelledLog struct{ label func(float64) string }

func (t labelledLog) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.LogTicks{Prec: -1}.Ticks(lo, hi)
	dense := hi/lo < 100
	var out []plot.Tick
	for _, tk := range ticks {
		if tk.Value < lo*0.999 || tk.Value > hi*1.001 {
			continue
		}
		m := tk.Value / math.Pow10(int(math.Floor(math.Log10(tk.Value)+1e-9)))
		if tk.Label != "" || (dense && (math.Abs(m-2) < 1e-6 || math.Abs(m-5) < 1e-6)) {
			tk.Label = t.label(tk.Value)
		}
		out = append(out, tk)
	}
	return out
}

func fmtRateLabel(v float64) string {
	if v == 0 {
		return "0"
	}
	return fmtRate(v)
}

func fmtUsLabel(v float64) string {
	if v == 0 {
		return "0"
	}
	return fmtDur(usDur(v))
}

// implColor is the color of an implementation in every chart: relock's
// variants blues, minimal dark grey, the limit light grey, each peer a
// color of its own (a colorblind-safe palette). A no-grant ("before") row
// has its implementation's color muted; a row of an earlier run, more so.
func implColor(impl string) color.Color {
	c := baseColor(impl)
	switch {
	case strings.Contains(impl, "(run "):
		return muted(c, 0.8)
	case isNoGrant(impl):
		return muted(c, 0.55)
	}
	return c
}

// muted is c mixed by f with the grey of its own lightness.
func muted(c color.Color, f float64) color.Color {
	r, g, b, _ := c.RGBA()
	rf, gf, bf := float64(r>>8), float64(g>>8), float64(b>>8)
	grey := 0.299*rf + 0.587*gf + 0.114*bf
	mix := func(v float64) uint8 { return uint8(v*(1-f) + grey*f + 0.5) }
	return color.NRGBA{mix(rf), mix(gf), mix(bf), 0xff}
}

func baseColor(impl string) color.Color {
	name := strings.ToLower(impl)
	switch {
	case strings.HasPrefix(name, "limit"):
		return color.NRGBA{0xa0, 0xa0, 0xa0, 0xff}
	case strings.HasPrefix(name, "relock/wake-one"):
		return color.NRGBA{0x56, 0xb4, 0xe9, 0xff}
	case strings.HasPrefix(name, "relock/no-grant"):
		return color.NRGBA{0x9e, 0xc5, 0xe8, 0xff}
	case strings.HasPrefix(name, "relock/lease"):
		return color.NRGBA{0x00, 0x9e, 0x73, 0xff}
	case strings.Contains(name, "rwlock") || strings.Contains(name, "semaphore"):
		return color.NRGBA{0x56, 0xb4, 0xe9, 0xff}
	case strings.HasPrefix(name, "relock"):
		return color.NRGBA{0x00, 0x72, 0xb2, 0xff}
	case strings.HasPrefix(name, "minimal"):
		return color.NRGBA{0x44, 0x44, 0x44, 0xff}
	case strings.HasPrefix(name, "rueidislock"):
		return color.NRGBA{0xe6, 0x9f, 0x00, 0xff}
	case strings.HasPrefix(name, "redsync"):
		return color.NRGBA{0xd5, 0x5e, 0x00, 0xff}
	case strings.HasPrefix(name, "bsm"):
		return color.NRGBA{0xcc, 0x79, 0xa7, 0xff}
	}
	return color.NRGBA{0x88, 0x88, 0x88, 0xff}
}

// paler is c mixed with white, for a second series.
func paler(c color.Color) color.Color {
	r, g, b, _ := c.RGBA()
	mix := func(v uint32) uint8 { return uint8((v>>8)*45/100 + 255*55/100) }
	return color.NRGBA{mix(r), mix(g), mix(b), 0xff}
}

// legendLine is the thumbnail of an implementation in a legend.
func legendLine(impl string) plot.Thumbnailer {
	return &plotter.Line{LineStyle: draw.LineStyle{Color: implColor(impl), Width: vg.Points(2), Dashes: implDashes(impl)}}
}

// implDashes are the dashes of an implementation's line: the no-grant
// ("before") lines are dashed.
func implDashes(impl string) []vg.Length {
	if isNoGrant(impl) {
		return []vg.Length{vg.Points(4), vg.Points(2)}
	}
	return nil
}

// saveChart draws panels side by side under title, with foot below, and
// legend (nil for none) on their right, and writes the SVG to path.
func saveChart(path, title string, foot []string, panels []*plot.Plot, legend *plot.Legend) error {
	const panelW = 330
	w := vg.Points(float64(panelW * len(panels)))
	// Tall enough for the rows of the bar panels; line charts take 300pt.
	rows := 0
	for _, p := range panels {
		if ticks, ok := p.Y.Tick.Marker.(plot.ConstantTicks); ok {
			rows = max(rows, len(ticks))
		} else {
			rows = max(rows, 9)
		}
	}
	h := vg.Points(min(max(float64(100+22*rows), 170), 320))
	if len(panels) == 1 {
		w = vg.Points(520)
	}
	var legendW vg.Length
	if legend != nil {
		r := legend.Rectangle(draw.Canvas{})
		legendW = r.Max.X - r.Min.X + vg.Points(16)
		w += legendW
	}
	c := vgsvg.New(w, h)
	dc := draw.New(c)
	titleSty := draw.TextStyle{Color: color.Black, Font: font.From(chartFont, 12), XAlign: draw.XCenter, YAlign: draw.YTop,
		Handler: plot.DefaultTextHandler}
	// A title wider than the chart is set smaller.
	for r := titleSty.Rectangle(title); titleSty.Font.Size > 8 && r.Max.X-r.Min.X > w-vg.Points(12); r = titleSty.Rectangle(title) {
		titleSty.Font.Size--
	}
	footSty := titleSty
	footSty.Font = font.From(chartFont, 7)
	footSty.Color = color.Gray{0x55}
	footSty.YAlign = draw.YBottom
	dc.FillText(titleSty, vg.Point{X: w / 2, Y: h - vg.Points(6)}, title)
	for i, line := range foot {
		dc.FillText(footSty, vg.Point{X: w / 2, Y: vg.Points(4 + 9*float64(len(foot)-1-i))}, line)
	}
	body := draw.Crop(dc, 0, -legendW, vg.Points(9*float64(len(foot))+8), -vg.Points(24))
	if legend != nil {
		legend.Draw(draw.Crop(dc, w-legendW+vg.Points(4), 0, 0, -vg.Points(48)))
	}
	tiles := draw.Tiles{Rows: 1, Cols: len(panels), PadX: vg.Points(14), PadLeft: vg.Points(6), PadRight: vg.Points(10),
		PadTop: vg.Points(2), PadBottom: vg.Points(2)}
	grid := plot.Align([][]*plot.Plot{panels}, tiles, body)
	for i, p := range panels {
		p.Draw(grid[0][i])
	}
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return err
	}
	// Fonts with Liberation Sans's widths, which the layout was measured
	// with, where it is not installed.
	out := strings.ReplaceAll(buf.String(), "font-family:"+svgFontName+";",
		"font-family:'"+svgFontName+"',Arimo,Arial,Helvetica,sans-serif;")
	return os.WriteFile(path, []byte(out), 0o644)
}

// svgFontName is how an SVG names chartFont.
const svgFontName = "Liberation Sans"

// chartTime is how the docs page dates a run.
func chartTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 MST") }
