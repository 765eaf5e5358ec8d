// Command mutants checks that the test suite kills a curated list of bugs
// put back into the library (mutants.txt): each mutant is applied to a
// fresh copy of the repository's files (never to the working tree), its
// targeted tests are run with go test -race, and the run fails when a
// mutant survives, cannot be applied, does not build, or is caught only by
// a test that hangs until go test's timeout (every mutant must be killed
// by a failing assertion). With -gremlins it also runs gremlins, at a
// pinned version, on packages whose tests are fast, and fails when its
// kill rate is below a threshold.
//
// Run it from the repository with scripts/mutants/run.sh [flags]; see
// docs/reliability.md.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	var (
		listPath   = flag.String("list", "", "the mutant list (default scripts/mutants/mutants.txt)")
		only       = flag.String("run", "", "run only the mutants whose id matches this regexp")
		timeout    = flag.Duration("timeout", 40*time.Second, "go test -timeout of each test command")
		baseline   = flag.String("baseline", "run", "what to check first on the unchanged tree: run (every targeted test exists and passes), list (exists only: for CI, right after the suite passed), none")
		check      = flag.Bool("check", false, "only check that every mutant applies; run no test")
		every      = flag.Bool("every", false, "run every test command of a mutant, also after one killed it (to show which tests kill it)")
		keep       = flag.Bool("keep", false, "keep the temporary copy and print its path")
		gremlins   = flag.String("gremlins", "", "comma-separated packages to run gremlins on after the mutants, each with its own threshold if wanted: ./watchdog=90,./pubsub")
		gThreshold = flag.Float64("gremlins-threshold", 0, "with -gremlins: fail when a package's efficacy (killed/(killed+lived), in %) is below this, unless the package has its own")
		show       = flag.Bool("show", false, "print the mutants (with -run, those) as a diff and the go test commands that must fail, and run nothing")
		gOnly      = flag.Bool("gremlins-only", false, "run only gremlins, not the listed mutants")
		gRace      = flag.Bool("gremlins-race", false, "run gremlins' tests under the race detector (about twice as slow)")
	)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, options{
		list: *listPath, only: *only, timeout: *timeout, baseline: *baseline, check: *check, keep: *keep, every: *every, show: *show,
		gremlins: splitList(*gremlins), gThreshold: *gThreshold, gOnly: *gOnly, gRace: *gRace,
	}); err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		os.Exit(1)
	}
}

type options struct {
	list, only, baseline string
	timeout              time.Duration
	check, keep, every   bool
	show                 bool
	gremlins             []string
	gThreshold           float64
	gOnly, gRace         bool
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func run(ctx context.Context, o options) error {
	start := time.Now()
	if o.baseline != "run" && o.baseline != "list" && o.baseline != "none" {
		return fmt.Errorf("-baseline %q: want run, list or none", o.baseline)
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	if o.list == "" {
		o.list = filepath.Join(root, "scripts", "mutants", "mutants.txt")
	}
	f, err := os.Open(o.list)
	if err != nil {
		return err
	}
	list, err := parseList(f)
	f.Close()
	if err != nil {
		return err
	}
	if o.only != "" {
		re, err := regexp.Compile(o.only)
		if err != nil {
			return fmt.Errorf("-run: %w", err)
		}
		list = slices.DeleteFunc(list, func(m Mutant) bool { return !re.MatchString(m.ID) })
		if len(list) == 0 && !o.gOnly {
			return fmt.Errorf("-run %q matches no mutant", o.only)
		}
	}
	if o.gOnly {
		list = nil
	}
	files, err := sourceFiles(root)
	if err != nil {
		return err
	}
	// Every mutant must apply before anything runs: a list that rotted
	// fails at once.
	var rotten []error
	for _, m := range list {
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(m.File)))
		if err == nil {
			_, err = m.apply(string(src))
		}
		if err != nil {
			rotten = append(rotten, err)
		}
	}
	if len(rotten) > 0 {
		return fmt.Errorf("mutants that cannot be applied:\n  %w", errors.Join(rotten...))
	}
	if o.check {
		fmt.Printf("mutants: all %d mutants apply\n", len(list))
		return nil
	}
	if o.show {
		for _, m := range list {
			fmt.Print(m.show(o.timeout))
		}
		return nil
	}

	tmp, err := os.MkdirTemp("", "relock-mutants-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Println("mutants: the copy is in", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	// A snapshot of the working tree's files, taken once, so that an edit
	// made while the run goes on changes none of it; the copy a mutant is
	// applied to is made from it again for every mutant.
	snapshot, tree := filepath.Join(tmp, "src"), filepath.Join(tmp, "tree")
	if err := copyFiles(root, snapshot, files); err != nil {
		return err
	}
	fresh := func() error {
		if err := os.RemoveAll(tree); err != nil {
			return err
		}
		return copyFiles(snapshot, tree, files)
	}

	var failed []string
	if len(list) > 0 {
		if o.baseline != "none" {
			if err := fresh(); err != nil {
				return err
			}
			if err := runBaseline(ctx, tree, list, o.timeout, o.baseline == "list"); err != nil {
				return err
			}
		}
		fmt.Printf("mutants: %d mutants, one at a time (go test -race -count=1 -timeout %v)\n", len(list), o.timeout)
		var killed int
		for _, m := range list {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := fresh(); err != nil {
				return err
			}
			r := runMutant(ctx, tree, m, o.timeout, o.every)
			fmt.Println(r.line(m))
			if r.verdict == verdictKilled {
				killed++
			} else {
				failed = append(failed, fmt.Sprintf("%s %s", m.ID, r.verdict))
				if r.detail != "" {
					fmt.Println(indent(r.detail, "      | "))
				}
			}
		}
		fmt.Printf("mutants: %d of %d killed in %v\n", killed, len(list), time.Since(start).Round(time.Second))
	}

	if len(o.gremlins) > 0 {
		if err := fresh(); err != nil {
			return err
		}
		gfailed, err := runGremlins(ctx, tree, tmp, o.gremlins, o.gThreshold, o.gRace)
		if err != nil {
			return err
		}
		failed = append(failed, gfailed...)
	}
	fmt.Printf("mutants: done in %v\n", time.Since(start).Round(time.Second))
	if len(failed) > 0 {
		return fmt.Errorf("FAIL: %s", strings.Join(failed, "; "))
	}
	return nil
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n")
}

// repoRoot is the top of the git checkout the command runs in.
func repoRoot() (string, error) {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("not in a git checkout: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// sourceFiles lists the files of the checkout as they are in the working
// tree: tracked ones (but those deleted) and untracked ones that are not
// ignored, so that a test being written is part of the copy.
func sourceFiles(root string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w", err)
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" || slices.Contains(files, f) {
			continue
		}
		if _, err := os.Lstat(filepath.Join(root, f)); err != nil {
			continue // deleted in the working tree
		}
		files = append(files, f)
	}
	return files, nil
}

// copyFiles copies files (relative to src) to dst, keeping their modes.
func copyFiles(src, dst string, files []string) error {
	for _, f := range files {
		from, to := filepath.Join(src, f), filepath.Join(dst, f)
		info, err := os.Lstat(from)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		switch {
		case info.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(from)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, to); err != nil {
				return err
			}
		case info.Mode().IsRegular():
			data, err := os.ReadFile(from)
			if err != nil {
				return err
			}
			if err := os.WriteFile(to, data, info.Mode().Perm()); err != nil {
				return err
			}
		}
	}
	return nil
}

type verdict string

const (
	verdictKilled   verdict = "killed"
	verdictSurvived verdict = "SURVIVED"
	verdictHung     verdict = "HUNG"   // caught only by go test's timeout
	verdictBroken   verdict = "BROKEN" // the mutant does not build
	verdictError    verdict = "ERROR"  // go test failed in another way
)

type result struct {
	verdict verdict
	by      []string // the tests that failed (package: Test)
	took    time.Duration
	detail  string
}

func (r result) line(m Mutant) string {
	by := ""
	if len(r.by) > 0 {
		by = " by " + strings.Join(r.by, ", ")
	}
	return fmt.Sprintf("%-4s %-8s %6.1fs  %s: %s%s", m.ID, r.verdict, r.took.Seconds(), m.File, m.Desc, by)
}

// runMutant applies m to the fresh copy tree and runs its test commands,
// one after the other, until one kills it (with every, all of them).
func runMutant(ctx context.Context, tree string, m Mutant, timeout time.Duration, every bool) result {
	start := time.Now()
	path := filepath.Join(tree, filepath.FromSlash(m.File))
	src, err := os.ReadFile(path)
	if err != nil {
		return result{verdict: verdictError, detail: err.Error()}
	}
	mutated, err := m.apply(string(src))
	if err == nil {
		err = os.WriteFile(path, []byte(mutated), 0o644)
	}
	if err != nil {
		return result{verdict: verdictError, detail: err.Error()}
	}
	res := result{verdict: verdictSurvived}
	for _, tr := range m.Tests {
		t0 := time.Now()
		out := goTest(ctx, tree, tr.Pkg, tr.Pattern(), timeout)
		var r result
		switch {
		case out.buildFailed:
			r = result{verdict: verdictBroken, detail: out.tail()}
		case out.timedOut:
			r = result{verdict: verdictHung, by: out.qualified(tr.Pkg), detail: out.timeoutReport()}
		case len(out.failed) > 0:
			r = result{verdict: verdictKilled, by: out.qualified(tr.Pkg)}
		case out.err != nil:
			r = result{verdict: verdictError, detail: out.tail()}
		default:
			r = result{verdict: verdictSurvived}
		}
		if every {
			by := strings.Join(r.by, ", ")
			fmt.Printf("     %-8s %6.1fs  %s %s %s\n", r.verdict, time.Since(t0).Seconds(), tr.Pkg, strings.Join(tr.Names, " "), by)
		}
		switch {
		case r.verdict == verdictSurvived:
			continue // this command passed: try the next
		case res.verdict == verdictKilled && r.verdict == verdictKilled:
			res.by = append(res.by, r.by...)
		case res.verdict == verdictSurvived || res.verdict == verdictKilled:
			// A hang or a failure to build outweighs a kill.
			res = r
		}
		if !every {
			break
		}
	}
	res.took = time.Since(start)
	return res
}

// runBaseline runs, once per package, every test the list names, on the
// unchanged tree: each must exist and pass, or the list proves nothing.
// With onlyList, it checks that they exist (go test -list), for a run
// right after the suite passed.
func runBaseline(ctx context.Context, tree string, list []Mutant, timeout time.Duration, onlyList bool) error {
	start := time.Now()
	var pkgs []string
	names := map[string][]string{}
	for _, m := range list {
		for _, tr := range m.Tests {
			if _, ok := names[tr.Pkg]; !ok {
				pkgs = append(pkgs, tr.Pkg)
			}
			for _, n := range tr.Names {
				if !slices.Contains(names[tr.Pkg], n) {
					names[tr.Pkg] = append(names[tr.Pkg], n)
				}
			}
		}
	}
	var problems []string
	for _, pkg := range pkgs {
		t0 := time.Now()
		tr := TestRun{Pkg: pkg, Names: names[pkg]}
		var out testOutput
		if onlyList {
			out = goList(ctx, tree, pkg, tr.Pattern())
		} else {
			// Each test must finish within timeout in a mutant's command:
			// together, within as many.
			out = goTest(ctx, tree, pkg, tr.Pattern(), timeout*time.Duration(len(tr.Names)))
		}
		var missing []string
		for _, n := range tr.Names {
			if !slices.Contains(out.passed, n) {
				missing = append(missing, n)
			}
		}
		fmt.Printf("baseline %-22s %d tests %6.1fs\n", pkg, len(tr.Names), time.Since(t0).Seconds())
		switch {
		case out.err != nil:
			problems = append(problems, fmt.Sprintf("%s fails on the unchanged tree (%s):\n%s", pkg,
				strings.Join(out.qualified(pkg), ", "), indent(out.tail(), "      | ")))
		case len(missing) > 0:
			problems = append(problems, fmt.Sprintf("%s has no passing test named %s", pkg, strings.Join(missing, ", ")))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("baseline:\n  %s", strings.Join(problems, "\n  "))
	}
	what := "passes"
	if onlyList {
		what = "exists"
	}
	fmt.Printf("baseline: every targeted test %s (%v)\n", what, time.Since(start).Round(time.Second))
	return nil
}

// goList lists the tests of pkg that match pattern (go test -list), as
// passed tests.
func goList(ctx context.Context, dir, pkg, pattern string) testOutput {
	dir, pkg = moduleOf(dir, pkg)
	cmd := exec.CommandContext(ctx, "go", "test", "-race", "-trimpath", "-list", pattern, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	out, err := cmd.CombinedOutput()
	o := testOutput{err: err}
	for _, line := range strings.Split(string(out), "\n") {
		o.lines = append(o.lines, line)
		if testPattern.MatchString(line) {
			o.passed = append(o.passed, line)
		}
	}
	return o
}

// testOutput is what one go test -json command reported.
type testOutput struct {
	err         error
	passed      []string // top-level tests
	failed      []string // tests, subtests included
	timedOut    bool
	buildFailed bool
	lines       []string // output, for the tail shown on failure
}

// qualified names the failed tests, package first; a test whose subtests
// failed is named by them.
func (o testOutput) qualified(pkg string) []string {
	var out []string
	for _, t := range o.failed {
		if slices.ContainsFunc(o.failed, func(sub string) bool { return strings.HasPrefix(sub, t+"/") }) {
			continue
		}
		out = append(out, strings.TrimSuffix(strings.TrimPrefix(pkg, "./"), "/")+"."+t)
	}
	return out
}

// timeoutReport is go test's report of a timeout: the panic line and the
// tests that were running.
func (o testOutput) timeoutReport() string {
	for i, l := range o.lines {
		if strings.HasPrefix(l, "panic: test timed out after") {
			end := i + 1
			for end < len(o.lines) && end < i+8 && !strings.HasPrefix(o.lines[end], "goroutine ") {
				end++
			}
			return strings.Join(o.lines[i:end], "\n")
		}
	}
	return o.tail()
}

func (o testOutput) tail() string {
	lines := o.lines
	if len(lines) > 25 {
		lines = lines[len(lines)-25:]
	}
	return strings.Join(lines, "\n")
}

type testEvent struct {
	Action      string
	Test        string
	Output      string
	FailedBuild string
}

// goTest runs one go test command in dir and reads its -json events.
func goTest(ctx context.Context, dir, pkg, pattern string, timeout time.Duration) testOutput {
	// go test's own timeout covers the tests, not the build: the hard
	// limit leaves time for both.
	ctx, cancel := context.WithTimeout(ctx, timeout+5*time.Minute)
	defer cancel()
	// -trimpath: the copy's path is new on every run; without it no
	// package built in an earlier run would come from the build cache.
	dir, pkg = moduleOf(dir, pkg)
	cmd := exec.CommandContext(ctx, "go", "test", "-race", "-trimpath", "-count=1", "-p", "1",
		"-timeout", timeout.String(), "-json", "-run", pattern, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return testOutput{err: err}
	}
	if err := cmd.Start(); err != nil {
		return testOutput{err: err}
	}
	var out testOutput
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		var ev testEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			out.lines = append(out.lines, sc.Text())
			continue
		}
		switch {
		case ev.Action == "build-fail" || ev.FailedBuild != "":
			out.buildFailed = true
		case ev.Action == "pass" && ev.Test != "" && !strings.Contains(ev.Test, "/"):
			out.passed = append(out.passed, ev.Test)
		case ev.Action == "fail" && ev.Test != "":
			out.failed = append(out.failed, ev.Test)
		}
		if ev.Output != "" {
			line := strings.TrimRight(ev.Output, "\n")
			if strings.HasPrefix(line, "panic: test timed out after") {
				out.timedOut = true
			}
			if strings.TrimSpace(line) != "" {
				out.lines = append(out.lines, line)
			}
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	out.err = cmd.Wait()
	if s := strings.TrimSpace(stderr.String()); s != "" {
		out.lines = append(out.lines, strings.Split(s, "\n")...)
		if out.err != nil && len(out.failed) == 0 && strings.Contains(s, "[setup failed]") {
			out.buildFailed = true
		}
	}
	if ctx.Err() != nil && out.err != nil {
		out.timedOut = true
	}
	// A test that fails only because the binary timed out is reported
	// as failed by go test; keep only the verdict "hung" for it.
	if out.err == nil {
		out.failed = nil
	}
	return out
}

// moduleOf returns where to run go test for pkg, a path relative to the
// tree at dir: in the module that holds it (relockotel, integration and
// bench are modules of their own, which go test refuses to reach from
// the root), with pkg relative to that module.
func moduleOf(dir, pkg string) (string, string) {
	if !strings.HasPrefix(pkg, "./") {
		return dir, pkg
	}
	rel := filepath.Clean(strings.TrimSuffix(strings.TrimPrefix(pkg, "./"), "/..."))
	for sub := rel; sub != "." && sub != "/" && sub != ""; sub = filepath.Dir(sub) {
		if _, err := os.Stat(filepath.Join(dir, sub, "go.mod")); err == nil {
			inner, _ := filepath.Rel(sub, strings.TrimPrefix(pkg, "./"))
			return filepath.Join(dir, sub), "./" + filepath.ToSlash(inner)
		}
	}
	return dir, pkg
}
