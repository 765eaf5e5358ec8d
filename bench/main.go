// Command bench measures relock beside its peers (rueidislock, redsync,
// bsm/redislock), beside a minimal Redisson-style lock written here (the
// cost of the algorithm alone) and beside the physical limit (a no-op
// script's round trips), against redis-server processes it starts itself. It prints a
// table per scenario on stdout and writes every figure to a JSON file.
//
//	go run . [-quick] [-duration 5s] [-scenarios a,b] [-peers a,b] [-json path] [-cpuprofile path] [-before path]
//	go run . -redraw results/latest.json   # charts and docs page only, from a results file
//
// After a run it draws the charts of the results into ../docs/bench and
// writes ../docs/benchmarks.md (see -charts and -docs).
//
// Grant on release is measured before and after in the same run: the
// "no-grant" implementations are relock without it (noGrant, in
// grantopt.go), interleaved with relock in scenarios 3, 4a and 4c; -before
// draws an earlier results file's relock rows beside them too.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// scenario is one part of the run. It returns the section it reports; it
// reads its settings from r.cfg and may record goals in r.
type scenario struct {
	name string
	desc string
	run  func(r *run, ctx context.Context) *section
}

var scenarios = []scenario{
	{"uncontended", "lock+unlock on one key, 1 goroutine", (*run).uncontended},
	{"throughput", "lock+unlock, N goroutines on distinct keys", (*run).throughput},
	{"contention", "M goroutines on one key", (*run).contention},
	{"clients16", "16 separate clients on one key", (*run).clients16},
	{"waiters100", "100 clients' waiters on one key, hand-offs", (*run).waiters100},
	{"fair", "relock: a fair lock, 16 goroutines of one client, then 16 clients", (*run).fair},
	{"waiters", "relock: 1,000 waiters on one lock", (*run).waitersOneLock},
	{"waiters10k", "relock: 10,000 waiters on 10,000 locks", (*run).waitersManyLocks},
	{"watchdog", "relock: 100,000 locks held on the watchdog", (*run).watchdog},
	{"redlock", "relock: RedLock over 5 servers vs a single lock", (*run).redlock},
	{"rwlock", "relock: read-write lock, read-heavy and write-heavy mixes beside a plain lock", (*run).rwMixes},
	{"permits", "relock: semaphore permit hand-off beside a lock hand-off", (*run).permitHandoff},
}

type config struct {
	Quick           bool          `json:"quick"`
	Duration        time.Duration `json:"duration_ns"`
	Rounds          int           `json:"rounds"`
	Scenarios       []string      `json:"scenarios"`
	Peers           []string      `json:"peers"`
	Goroutines      int           `json:"throughput_goroutines"`
	Contenders      int           `json:"contention_goroutines"`
	Hold            time.Duration `json:"contention_hold_ns"`
	Clients         int           `json:"clients16_clients"`
	WaiterClients   int           `json:"waiters100_clients"`
	ClientsDuration time.Duration `json:"clients_duration_ns"`
	Waiters         int           `json:"waiters_one_lock"`
	ManyLocks       int           `json:"waiters_many_locks"`
	Held            int           `json:"watchdog_locks"`
	HeldFor         time.Duration `json:"watchdog_duration_ns"`
	WatchdogTimeout time.Duration `json:"watchdog_timeout_ns"`
	RedLockServers  int           `json:"redlock_servers"`
	SharedServer    bool          `json:"shared_server"`
	// Before is the earlier results file of -before (as the flag gave
	// it, relative to bench/): the charts draw its figures beside these.
	Before string `json:"before,omitempty"`
}

// report is what the JSON file holds.
type report struct {
	Started  time.Time  `json:"started"`
	Machine  machine    `json:"machine"`
	Config   config     `json:"config"`
	Peers    []peerInfo `json:"peers"`
	Sections []*section `json:"sections"`
	Goals    []goal     `json:"goals"`
}

type peerInfo struct {
	Name     string `json:"name"`
	Settings string `json:"settings"`
}

// section is one scenario's results: a table for people, Results for the
// JSON file.
type section struct {
	ID      string     `json:"id"`
	Title   string     `json:"title"`
	Notes   []string   `json:"notes,omitempty"`
	Skipped string     `json:"skipped,omitempty"`
	Columns []string   `json:"-"`
	Rows    [][]string `json:"-"`
	Results any        `json:"results,omitempty"`
}

// goal is one target of the issue, checked against this run's figures.
type goal struct {
	Name   string `json:"name"`
	Target string `json:"target"`
	Got    string `json:"got"`
	Met    bool   `json:"met"`
}

// run is the state of one program run.
type run struct {
	cfg    config
	peers  []peer
	srv    *server // the main server; scenarios flush it when done
	report *report
	limit1 *lockRow // the limit at 1 goroutine, once measured
	// oneClient is relock's row of scenario 3 (its goroutines share one
	// Client), once measured: what the clients16 scenario is held to.
	oneClient *lockRow
	verbose   io.Writer
	// memprofile is where to write a heap profile at the measured point
	// of the scale runs.
	memprofile string
	// before is the results file of -before, if given: the goals of
	// scenario 4a are held to it too.
	before *report
}

func (r *run) goal(name, target, got string, met bool) {
	r.report.Goals = append(r.report.Goals, goal{name, target, got, met})
}

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(r.verbose, "bench: "+format+"\n", args...)
}

func main() {
	if err := mainErr(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func mainErr() error {
	var (
		quick      = flag.Bool("quick", false, "small counts and short durations: the whole run takes under a minute")
		duration   = flag.Duration("duration", 5*time.Second, "measured time of each implementation in each timed scenario but clients16 and waiters100 (800ms with -quick)")
		rounds     = flag.Int("rounds", 5, "the timed scenarios alternate the implementations in this many rounds (2 with -quick)")
		scenList   = flag.String("scenarios", "all", "comma list of scenarios: "+scenarioNames())
		peerList   = flag.String("peers", "all", "comma list of implementations: "+peerNames())
		jsonPath   = flag.String("json", filepath.Join("results", "latest.json"), "write the results to this JSON file (\"\" for none); a partial run (-quick, or a subset of -scenarios or -peers) writes results/partial.json and draws no charts or page unless -json, -charts or -docs is given")
		cpuprofile = flag.String("cpuprofile", "", "write a CPU profile of the selected scenarios to this file")
		memprofile = flag.String("memprofile", "", "write a heap profile of every allocation (MemProfileRate 1: slow) while the waiters of waiters10k, and the holds of watchdog, are in place")
		goroutines = flag.Int("goroutines", 64, "goroutines of the throughput scenario")
		contenders = flag.Int("contenders", 16, "goroutines of the contention scenario")
		shared     = flag.Bool("shared-server", false, "scenarios 1-3: run every implementation on one redis-server instead of one each")
		hold       = flag.Duration("hold", time.Millisecond, "how long each goroutine of the contention and clients16 scenarios holds the lock")
		clients    = flag.Int("clients", 16, "separate clients of the clients16 scenario")
		waitClient = flag.Int("waiter-clients", 100, "separate clients of the waiters100 scenario")
		clientsDur = flag.Duration("clients-duration", 3*time.Second, "measured time of each implementation in clients16 and waiters100 (500ms with -quick)")
		waiters    = flag.Int("waiters", 1000, "waiters on one lock")
		manyLocks  = flag.Int("locks", 10000, "waiters on as many locks")
		held       = flag.Int("held", 100000, "locks held on the watchdog (10,000 with -quick)")
		heldFor    = flag.Duration("held-for", 10*time.Second, "how long the watchdog run is measured (4s with -quick)")
		chartsDir  = flag.String("charts", filepath.Join("..", "docs", "bench"), "draw the SVG charts of the results written to -json into this directory (\"\" for none)")
		docsPath   = flag.String("docs", filepath.Join("..", "docs", "benchmarks.md"), "write the benchmarks page (tables and charts) of the results written to -json to this file (\"\" for none)")
		redraw     = flag.String("redraw", "", "run nothing: redraw the charts (-charts) and the page (-docs) from this results file (bench.sh runs the program in bench/: paths are relative to it)")
		beforePath = flag.String("before", "", "an earlier results file (e.g. results/2026-11-26.json): the charts of scenarios 3, 4a and 4c draw its relock and relock/wake-one figures beside this run's, and scenario 4a's hand-off goal is held to its relock/wake-one too; "+
			"the results file names it, and -redraw draws it again unless -before is given (\"\" for none)")
	)
	flag.Parse()
	set := make(map[string]bool)
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *redraw != "" {
		before := beforeFlag{path: *beforePath, set: set["before"]}
		return drawResults(*redraw, before, *chartsDir, *docsPath)
	}
	var before *report
	if *beforePath != "" {
		var err error
		if before, err = readJSON(*beforePath); err != nil {
			return fmt.Errorf("-before: %w", err)
		}
	}
	if *quick {
		if !set["duration"] {
			*duration = 800 * time.Millisecond
		}
		if !set["rounds"] {
			*rounds = 2
		}
		if !set["held"] {
			*held = 10000
		}
		if !set["held-for"] {
			*heldFor = 4 * time.Second
		}
		if !set["clients-duration"] {
			*clientsDur = 500 * time.Millisecond
		}
	}
	sel, err := pick(*scenList, scenarioNameList())
	if err != nil {
		return fmt.Errorf("-scenarios: %w", err)
	}
	var all []string
	for _, p := range peers() {
		all = append(all, p.name)
	}
	peerSel, err := pick(*peerList, all)
	if err != nil {
		return fmt.Errorf("-peers: %w", err)
	}
	if partial := *quick || len(sel) < len(scenarios) || len(peerSel) < len(all); partial {
		// A partial run must not replace the full run that the docs are
		// drawn from: its results go to a file of their own, and it draws
		// nothing, unless the flags say otherwise.
		if !set["json"] {
			*jsonPath = filepath.Join("results", "partial.json")
		}
		if !set["charts"] {
			*chartsDir = ""
		}
		if !set["docs"] {
			*docsPath = ""
		}
	}
	if *memprofile != "" {
		runtime.MemProfileRate = 1
	}
	r := &run{verbose: os.Stderr, memprofile: *memprofile, before: before}
	for _, p := range peers() {
		if slices.Contains(peerSel, p.name) {
			r.peers = append(r.peers, p)
		}
	}
	r.cfg = config{
		Quick: *quick, Duration: *duration, Rounds: *rounds, Scenarios: sel, Peers: peerSel,
		Goroutines: *goroutines, Contenders: *contenders, Hold: *hold, Clients: *clients, WaiterClients: *waitClient, ClientsDuration: *clientsDur, Waiters: *waiters,
		ManyLocks: *manyLocks, Held: *held, HeldFor: *heldFor,
		WatchdogTimeout: 3 * time.Second, RedLockServers: 5, SharedServer: *shared, Before: *beforePath,
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	r.srv, err = startServer()
	if err != nil {
		return err
	}
	defer r.srv.stop()

	r.report = &report{Started: time.Now(), Machine: describeMachine(ctx, r.srv), Config: r.cfg}
	for _, p := range r.peers {
		r.report.Peers = append(r.report.Peers, peerInfo{p.name, p.settings})
	}
	printHeader(os.Stdout, r.report)

	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	for _, s := range scenarios {
		if !slices.Contains(sel, s.name) {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		r.logf("running %s (%s)", s.name, s.desc)
		start := time.Now()
		sec := s.run(r, ctx)
		r.logf("%s done in %v", s.name, time.Since(start).Round(10*time.Millisecond))
		if err := r.srv.flush(ctx); err != nil && ctx.Err() == nil {
			return fmt.Errorf("flush after %s: %w", s.name, err)
		}
		r.report.Sections = append(r.report.Sections, sec)
		printSection(os.Stdout, sec)
	}
	printGoals(os.Stdout, r.report.Goals)

	if *jsonPath != "" {
		if err := writeJSON(*jsonPath, r.report); err != nil {
			return err
		}
		r.logf("results written to %s", *jsonPath)
		if err := drawResults(*jsonPath, beforeFlag{path: *beforePath, set: true}, *chartsDir, *docsPath); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// beforeFlag is the -before flag as drawResults takes it: unless set, the
// earlier results file that the results file names is drawn.
type beforeFlag struct {
	path string
	set  bool
}

// drawResults draws the charts of the results file path into chartsDir
// and writes the benchmarks page to docsPath (either "" for none). The
// charts draw the figures of an earlier results file beside (before).
func drawResults(path string, before beforeFlag, chartsDir, docsPath string) error {
	if chartsDir == "" && docsPath == "" {
		return nil
	}
	rep, err := readJSON(path)
	if err != nil {
		return err
	}
	if !before.set {
		before.path = rep.Config.Before
	}
	rep.Config.Before = before.path
	var earlier *earlierRun
	if before.path != "" {
		old, err := readJSON(before.path)
		if err != nil {
			return fmt.Errorf("-before: %w", err)
		}
		earlier = &earlierRun{rep: old, source: repoPath(before.path)}
	}
	source := repoPath(path)
	var charts []chart
	if chartsDir != "" {
		if charts, err = writeCharts(rep, earlier, source, chartsDir); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "bench: %d charts drawn in %s\n", len(charts), chartsDir)
	}
	if docsPath != "" {
		dir := chartsDir
		if dir != "" {
			if rel, err := filepath.Rel(filepath.Dir(docsPath), chartsDir); err == nil {
				dir = rel
			}
		}
		if err := writeDocs(docsPath, rep, earlier, source, dir, charts); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "bench: %s written from %s\n", docsPath, source)
	}
	return nil
}

// readJSON reads a results file that writeJSON wrote.
func readJSON(path string) (*report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &rep, nil
}

// repoPath is path relative to the repository's root (the directory of
// bench.sh), as the charts and the page cite it; path itself when it is
// not in the repository.
func repoPath(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "bench.sh")); err == nil {
			if rel, err := filepath.Rel(dir, abs); err == nil {
				return filepath.ToSlash(rel)
			}
			return path
		}
		if filepath.Dir(dir) == dir {
			return path
		}
	}
}

// writeHeapProfile writes a heap profile to r.memprofile, if set; the
// scenario's name goes before the extension.
func (r *run) writeHeapProfile(scenario string) {
	if r.memprofile == "" {
		return
	}
	ext := filepath.Ext(r.memprofile)
	path := strings.TrimSuffix(r.memprofile, ext) + "." + scenario + ext
	f, err := os.Create(path)
	if err != nil {
		r.logf("memprofile: %v", err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		r.logf("memprofile: %v", err)
		return
	}
	r.logf("heap profile written to %s", path)
}

func scenarioNameList() []string {
	var names []string
	for _, s := range scenarios {
		names = append(names, s.name)
	}
	return names
}

func scenarioNames() string { return strings.Join(scenarioNameList(), ",") }

func peerNames() string {
	var names []string
	for _, p := range peers() {
		names = append(names, p.name)
	}
	return strings.Join(names, ",")
}

// pick parses a comma list ("all" for every name) against the known names.
func pick(list string, known []string) ([]string, error) {
	if list == "all" || list == "" {
		return known, nil
	}
	var out []string
	for n := range strings.SplitSeq(list, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(known, n) {
			return nil, fmt.Errorf("unknown name %q (known: %s)", n, strings.Join(known, ","))
		}
		out = append(out, n)
	}
	return out, nil
}

func writeJSON(path string, rep *report) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ---- the table on stdout ----

func printHeader(w io.Writer, rep *report) {
	m := rep.Machine
	fmt.Fprintf(w, "relock benchmark, %s", rep.Started.UTC().Format("2006-01-02 15:04 MST"))
	if rep.Config.Quick {
		fmt.Fprint(w, " (-quick)")
	}
	fmt.Fprintf(w, ", timed scenarios: %v per implementation in %d interleaved rounds\n", rep.Config.Duration, rep.Config.Rounds)
	fmt.Fprintf(w, "machine: %s, %d cores (GOMAXPROCS %d), %s, %s %s/%s, redis-server %s, load average %s at start\n",
		m.CPU, m.Cores, m.GOMAXPROCS, m.Kernel, m.Go, m.GOOS, m.GOARCH, m.Redis, m.LoadAvg)
	if len(m.Modules) > 0 {
		fmt.Fprintf(w, "modules: %s\n", strings.Join(m.Modules, ", "))
	}
	fmt.Fprintln(w, "implementations:")
	for _, p := range rep.Peers {
		fmt.Fprintf(w, "  %-14s %s\n", p.Name, p.Settings)
	}
}

func printSection(w io.Writer, s *section) {
	fmt.Fprintf(w, "\n== %s\n", s.Title)
	if s.Skipped != "" {
		fmt.Fprintf(w, "skipped: %s\n", s.Skipped)
	}
	if len(s.Rows) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, strings.Join(s.Columns, "\t")+"\t")
		for _, row := range s.Rows {
			fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
		}
		tw.Flush()
	}
	for _, n := range s.Notes {
		fmt.Fprintf(w, "  %s\n", n)
	}
}

func printGoals(w io.Writer, goals []goal) {
	if len(goals) == 0 {
		return
	}
	fmt.Fprintln(w, "\n== Goals")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "goal\ttarget\tmeasured\tmet")
	for _, g := range goals {
		met := "yes"
		if !g.Met {
			met = "NO"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", g.Name, g.Target, g.Got, met)
	}
	tw.Flush()
}

// ---- formatting ----

// fmtDur prints a latency with three significant digits.
func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", d.Nanoseconds())
	case d < time.Millisecond:
		return fmt.Sprintf("%.3gµs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.3gms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.3gs", d.Seconds())
	}
}

// fmtRate prints a rate with thousands separators.
func fmtRate(v float64) string { return fmtInt(int64(v + 0.5)) }

func fmtInt(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func fmtBytes(v float64) string {
	switch {
	case v >= 1<<20:
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	case v >= 10<<10:
		return fmt.Sprintf("%.1f KiB", v/(1<<10))
	default:
		return fmt.Sprintf("%.0f B", v)
	}
}

func fmtRatio(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
