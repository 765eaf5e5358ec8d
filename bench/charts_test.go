package main

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeReport is a small results value with every kind of section that has
// a chart, and a few that have a table only.
func fakeReport() *report {
	libs := []string{"relock", "relock/wake-one", "minimal", "rueidislock", "redsync", "bsm"}
	loop := func(goroutines int) []*lockRow {
		rows := []*lockRow{{Impl: "limit", Goroutines: goroutines, Clients: 1, Ops: 1000, OpsPerSec: 9000, P50us: 120, P99us: 200}}
		for i, l := range libs {
			rows = append(rows, &lockRow{Impl: l, Goroutines: goroutines, Clients: 1, Ops: 900, OpsPerSec: 8000 - 1000*float64(i),
				P50us: 125 + 10*float64(i), P99us: 250 + 20*float64(i), AllocsPerOp: 6, ClientCPUus: 66})
		}
		return rows
	}
	contended := func(clients int, libs ...string) []*lockRow {
		rows := []*lockRow{{Impl: "limit", Goroutines: 1, Clients: 1, HandoffP50us: 127, HandoffP99us: 206, Reference: true}}
		for i, l := range libs {
			rows = append(rows, &lockRow{Impl: l, Goroutines: 16, Clients: clients, Ops: 500, OpsPerSec: 700 - 50*float64(i),
				Handoffs: 500, HandoffP50us: 220 * float64(i+1), HandoffP99us: 400 * float64(i+1)})
		}
		return rows
	}
	redlock := &redlockResult{Servers: 5, Rows: []*lockRow{
		{Impl: "limit single", Ops: 100, OpsPerSec: 7900, P50us: 130, P99us: 260},
		{Impl: "limit x5", Ops: 100, OpsPerSec: 3400, P50us: 285, P99us: 518, ClientCPUus: 236},
		{Impl: "relock single lock", Ops: 100, OpsPerSec: 7200, P50us: 132, P99us: 280, AllocsPerOp: 6, ClientCPUus: 77},
		{Impl: "relock RedLock x5", Ops: 100, OpsPerSec: 2300, P50us: 400, P99us: 740, AllocsPerOp: 33, ClientCPUus: 319},
		{Impl: "redsync single", Ops: 100, OpsPerSec: 6100, P50us: 165, P99us: 317, AllocsPerOp: 38, ClientCPUus: 123},
		{Impl: "redsync x5", Ops: 100, OpsPerSec: 2500, P50us: 371, P99us: 692, AllocsPerOp: 142, ClientCPUus: 352},
	}}
	rw := []*syncRow{
		{Impl: "relock plain lock", Ops: 10, OpsPerSec: 716, WriteP50us: 30000, WriteP99us: 50000},
		{Impl: "relock rwlock read-heavy", ReadShare: 0.9, Ops: 10, OpsPerSec: 2116, ReadP50us: 193, WriteP50us: 68000},
	}
	permits := []*syncRow{
		{Impl: "relock plain lock", Ops: 10, OpsPerSec: 4479, HandoffP50us: 144, HandoffP99us: 379},
		{Impl: "relock semaphore", Ops: 10, OpsPerSec: 3739, HandoffP50us: 179, HandoffP99us: 537},
	}
	return &report{
		Started: time.Date(2026, 11, 25, 20, 2, 0, 0, time.UTC),
		Machine: machine{CPU: "Test CPU 9000", Cores: 2, GOMAXPROCS: 2, Go: "go1.26.8", GOOS: "linux", GOARCH: "amd64",
			Kernel: "linux 6.18", Redis: "7.0.15", LoadAvg: "0.70 0.74 0.49"},
		Config: config{Duration: 5 * time.Second, Rounds: 5},
		Peers:  []peerInfo{{Name: "relock", Settings: "defaults | watchdog 30s"}},
		Sections: []*section{
			{ID: "uncontended", Title: "1. Uncontended", Notes: []string{"one op = Lock+Unlock"}, Results: loop(1)},
			{ID: "throughput", Title: "2. Throughput", Results: loop(64)},
			{ID: "contention", Title: "3. Contention", Results: contended(1, append([]string{"relock/no-grant"}, libs...)...)},
			{ID: "clients16", Title: "4a. 16 clients", Results: contended(16,
				append([]string{"relock/no-grant", "relock/wake-one/no-grant"}, libs...)...)},
			{ID: "waiters100", Title: "4b. 100 clients", Results: contended(100, libs...)},
			{ID: "fair", Title: "4c. Fair lock", Results: contended(16, "relock fair/no-grant, 1 client", "relock fair, 1 client",
				"relock fair/no-grant, 16 clients", "relock fair, 16 clients")},
			{ID: "waiters", Title: "5a. 1,000 waiters", Results: &waitersResult{Waiters: 1000, AllWaiting: true, SubscribedChannels: 1}},
			{ID: "watchdog", Title: "5c. watchdog", Results: &watchdogResult{Locks: 10, AcquireSeconds: 1, RenewalsPerSec: 600, PipelinesPerSec: 2}},
			{ID: "redlock", Title: "5d. RedLock", Results: redlock},
			{ID: "rwlock", Title: "6a. read-write lock", Results: rw},
			{ID: "permits", Title: "6b. permits", Results: permits},
			{ID: "waiters10k", Title: "5b. skipped", Skipped: "not run"},
		},
		Goals: []goal{{Name: "a goal", Target: "< 1ms", Got: "220µs", Met: true}},
	}
}

// TestCharts draws the charts and the page of a small results value, as
// the run does, and from the same value written to a file and read back,
// as -redraw does: every chart is valid SVG that names the run, the
// machine and every implementation of its section.
func TestCharts(t *testing.T) {
	rep := fakeReport()
	path := filepath.Join(t.TempDir(), "results.json")
	require.NoError(t, writeJSON(path, rep))
	read, err := readJSON(path)
	require.NoError(t, err)

	for name, r := range map[string]*report{"in memory": rep, "read back": read} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			charts, err := writeCharts(r, nil, "bench/results/test.json", filepath.Join(dir, "bench"))
			require.NoError(t, err)
			var files []string
			for _, c := range charts {
				files = append(files, c.File)
			}
			assert.ElementsMatch(t, []string{"uncontended.svg", "throughput.svg", "contention.svg", "clients16.svg",
				"waiters100.svg", "fair.svg", "scaling.svg", "redlock.svg", "rwlock.svg", "permits.svg"}, files)

			for _, c := range charts {
				b, err := os.ReadFile(filepath.Join(dir, "bench", c.File))
				require.NoError(t, err, c.File)
				svg := string(b)
				assertValidSVG(t, c.File, b)
				for _, want := range []string{"2026-11-25 20:02 UTC", "Test CPU 9000", "redis-server 7.0.15", "bench/results/test.json"} {
					assert.True(t, strings.Contains(svg, want), "%s does not name the run and the machine: no %q", c.File, want)
				}
				for _, impl := range implsOf(t, r, c.Section) {
					assert.True(t, strings.Contains(svg, ">"+xmlText(impl)), "%s does not name %s", c.File, impl)
				}
			}

			page := filepath.Join(dir, "benchmarks.md")
			require.NoError(t, writeDocs(page, r, nil, "bench/results/test.json", "bench", charts))
			b, err := os.ReadFile(page)
			require.NoError(t, err)
			md := string(b)
			assert.Contains(t, md, "`bench/results/test.json`")
			assert.Contains(t, md, "Test CPU 9000")
			for _, c := range charts {
				assert.Contains(t, md, "](bench/"+c.File+")")
			}
			for _, want := range []string{"| relock RedLock x5 | 2,300 |", "| relock semaphore | 3,739 |",
				"| relock fair, 16 clients | 550 |", "measured before and",
				"| subscribed channels (PUBSUB CHANNELS) | 1 | 1 |", `defaults \| watchdog 30s`, "Skipped: not run"} {
				assert.Contains(t, md, want)
			}
		})
	}
}

// implsOf are the implementations a chart of section id draws.
func implsOf(t *testing.T, r *report, id string) []string {
	t.Helper()
	ids := []string{id}
	scaling := id == "scaling"
	if scaling {
		ids = []string{"contention", "clients16", "waiters100"}
	}
	var impls []string
	for _, id := range ids {
		s := findSection(r, id)
		require.NotNil(t, s, id)
		switch id {
		case "redlock":
			res, err := decodeResults[*redlockResult](s)
			require.NoError(t, err)
			for _, row := range res.Rows {
				impls = append(impls, row.Impl)
			}
		case "rwlock", "permits":
			rows, err := decodeResults[[]*syncRow](s)
			require.NoError(t, err)
			for _, row := range rows {
				impls = append(impls, row.Impl)
			}
		default:
			rows, err := decodeResults[[]*lockRow](s)
			require.NoError(t, err)
			for _, row := range rows {
				if !scaling || !row.Reference {
					impls = append(impls, row.Impl)
				}
			}
		}
	}
	return impls
}

// assertValidSVG checks that b is well-formed XML whose root is an svg
// element.
func assertValidSVG(t *testing.T, name string, b []byte) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(string(b)))
	root := ""
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if !assert.NoError(t, err, "%s is not well-formed XML", name) {
			return
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	assert.Equal(t, "svg", root, "%s: root element", name)
}

func xmlText(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// TestDecodeResults: a section's results decode from what a scenario
// stored and from what a results file holds.
func TestDecodeResults(t *testing.T) {
	rows := []*lockRow{{Impl: "relock", OpsPerSec: 1}}
	s := &section{ID: "uncontended", Results: rows}
	got, err := decodeResults[[]*lockRow](s)
	require.NoError(t, err)
	assert.Equal(t, rows, got)

	b, err := json.Marshal(s)
	require.NoError(t, err)
	var back section
	require.NoError(t, json.Unmarshal(b, &back))
	got, err = decodeResults[[]*lockRow](&back)
	require.NoError(t, err)
	assert.Equal(t, rows, got)
}

// TestBeforeAfter: each implementation's no-grant row is drawn just before
// it, the two labelled, and the earlier run's row of relock and
// relock/wake-one before them.
func TestBeforeAfter(t *testing.T) {
	rows := []*lockRow{
		{Impl: "limit", Reference: true, HandoffP50us: 100},
		{Impl: "relock", Ops: 1}, {Impl: "relock/no-grant", Ops: 1},
		{Impl: "relock/wake-one/no-grant", Ops: 1}, {Impl: "relock/wake-one", Ops: 1},
		{Impl: "minimal", Ops: 1}, {Impl: "lonely/no-grant", Ops: 1},
		{Impl: "relock fair/no-grant, 16 clients", Ops: 1}, {Impl: "relock fair, 16 clients", Ops: 1},
	}
	old := []*lockRow{{Impl: "relock", Ops: 1, HandoffP50us: 245}, {Impl: "relock/wake-one", Ops: 1}, {Impl: "minimal", Ops: 1}}
	earlier := &earlierRun{rep: &report{Started: time.Date(2026, 11, 26, 7, 50, 0, 0, time.UTC)}}
	out, pairs, olds := beforeAfter(rows, old, earlier)
	var names []string
	for _, r := range out {
		names = append(names, r.Impl)
	}
	assert.Equal(t, []string{"limit",
		"relock (run 2026-11-26)", "relock/no-grant (before)", "relock (after)",
		"relock/wake-one (run 2026-11-26)", "relock/wake-one/no-grant (before)", "relock/wake-one (after)",
		"minimal", "lonely/no-grant",
		"relock fair/no-grant, 16 clients (before)", "relock fair, 16 clients (after)"}, names)
	assert.Equal(t, 3, pairs)
	assert.Equal(t, 2, olds)
	assert.Equal(t, 245.0, out[1].HandoffP50us, "the earlier run's figures")
	assert.Equal(t, "relock", rows[1].Impl, "the rows themselves are left as they are")

	out, pairs, olds = beforeAfter(rows[:2], nil, nil)
	assert.Equal(t, rows[:2], out)
	assert.Zero(t, pairs+olds)
}

// TestChartsBefore: with an earlier results file, the contended charts
// draw its relock rows and name it, the page says so, and a results file
// that names it (-before at run time) draws it again on -redraw.
func TestChartsBefore(t *testing.T) {
	dir := t.TempDir()
	old := fakeReport()
	old.Started = time.Date(2026, 11, 24, 7, 50, 0, 0, time.UTC)
	oldPath := filepath.Join(dir, "old.json")
	require.NoError(t, writeJSON(oldPath, old))
	rep := fakeReport()
	rep.Config.Before = oldPath
	path := filepath.Join(dir, "new.json")
	require.NoError(t, writeJSON(path, rep))

	charts, page := filepath.Join(dir, "charts"), filepath.Join(dir, "benchmarks.md")
	require.NoError(t, drawResults(path, beforeFlag{}, charts, page))
	b, err := os.ReadFile(filepath.Join(charts, "clients16.svg"))
	require.NoError(t, err)
	svg := string(b)
	for _, want := range []string{">relock (run 2026-11-24)", ">relock/wake-one (run 2026-11-24)", ">relock/no-grant (before)",
		">relock (after)", ">relock/wake-one/no-grant (before)", "old.json"} {
		assert.Contains(t, svg, want)
	}
	b, err = os.ReadFile(filepath.Join(charts, "uncontended.svg"))
	require.NoError(t, err)
	assert.NotContains(t, string(b), "run 2026-11-24", "only the contended charts draw the earlier run")
	b, err = os.ReadFile(page)
	require.NoError(t, err)
	assert.Contains(t, string(b), "old.json")

	// -before "" on -redraw draws none.
	require.NoError(t, drawResults(path, beforeFlag{set: true}, charts, ""))
	b, err = os.ReadFile(filepath.Join(charts, "clients16.svg"))
	require.NoError(t, err)
	assert.NotContains(t, string(b), "run 2026-11-24")
	assert.Contains(t, string(b), ">relock/no-grant (before)")
}

// TestGrantGoals: the goals of issue 35 from the rows of scenarios 3 and
// 4a, and from an earlier run's.
func TestGrantGoals(t *testing.T) {
	r := &run{report: &report{}, verbose: io.Discard}
	r.grantGoals(16, time.Millisecond,
		&lockRow{Impl: "relock", Ops: 10, Handoffs: 10, HandoffP50us: 120, OpsPerSec: 870},
		&lockRow{Impl: "minimal", Ops: 10, Handoffs: 10, HandoffP50us: 236},
		&lockRow{Impl: "relock/no-grant", Ops: 10, Handoffs: 10, HandoffP50us: 245, OpsPerSec: 683},
		&lockRow{Impl: "mutex", Ops: 10, Handoffs: 10, HandoffP50us: 4, OpsPerSec: 880, HoldMeanUs: 1130})
	require.Len(t, r.report.Goals, 2)
	assert.True(t, r.report.Goals[0].Met, "%+v", r.report.Goals[0])
	assert.Contains(t, r.report.Goals[0].Got, "0.51x")
	assert.True(t, r.report.Goals[1].Met, "%+v", r.report.Goals[1])
	assert.Contains(t, r.report.Goals[1].Got, "0.87x (870/s; relock/no-grant: 0.68x, 683/s; an in-process lock in the same harness: 0.88x, 880/s, holds of 1.13ms on average (relock's 0.99x of it))")

	r = &run{report: &report{}, verbose: io.Discard, cfg: config{Before: "results/old.json"}}
	old := fakeReport()
	oldRows, err := decodeResults[[]*lockRow](findSection(old, "clients16"))
	require.NoError(t, err)
	find(oldRows, "relock/wake-one").HandoffP50us = 440
	r.before = old
	rows := []*lockRow{
		{Impl: "relock/no-grant", Handoffs: 10, HandoffP50us: 494},
		{Impl: "relock", Handoffs: 10, HandoffP50us: 480},
		{Impl: "relock/wake-one/no-grant", Handoffs: 10, HandoffP50us: 338},
		{Impl: "relock/wake-one", Handoffs: 10, HandoffP50us: 300},
	}
	r.clientsGrantGoals(16, rows)
	require.Len(t, r.report.Goals, 2)
	g := r.report.Goals[0]
	assert.True(t, g.Met, "%+v", g)
	assert.Equal(t, "1.65x (relock/wake-one 300µs vs relock/no-grant 494µs; relock/wake-one/no-grant 338µs)", g.Got)
	g = r.report.Goals[1]
	assert.Contains(t, g.Name, "relock/wake-one of the 2026-11-25 run (-before results/old.json)")
	assert.False(t, g.Met, "%+v", g)
	assert.Equal(t, "1.47x (relock/wake-one 300µs vs relock/wake-one of the 2026-11-25 run 440µs)", g.Got)
}
