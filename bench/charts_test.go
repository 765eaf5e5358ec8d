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
	contended := func(clients int) []*lockRow {
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
			{ID: "contention", Title: "3. Contention", Results: contended(1)},
			{ID: "clients16", Title: "4a. 16 clients", Results: contended(16)},
			{ID: "waiters100", Title: "4b. 100 clients", Results: contended(100)},
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
				"waiters100.svg", "scaling.svg", "redlock.svg", "rwlock.svg", "permits.svg"}, files)

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
