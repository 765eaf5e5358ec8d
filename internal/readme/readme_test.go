// Package readme_test keeps the Go code of the documentation compiled.
//
// Every ```go block of README.md and of docs/*.md must be, byte for byte
// once dedented, one of:
//
//   - a region of an Example function in one of the repository's example
//     test files (any file named *example_test.go), between a
//     "// README begin" and a "// README end" line: the Examples compile
//     with their packages, and run when they have an Output comment;
//   - the whole of examples/quickstart/main.go, a complete program, which
//     TestReadmeQuickstartRuns builds and runs against a redis-server it
//     starts.
//
// Every region, and the quick start, must appear in one of those pages
// (the quick start in README.md), so that neither side drifts from the
// other.
package readme_test

import (
	"bufio"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

const (
	root = "../.."
	// quickstart is the README's first program, relative to root.
	quickstart = "examples/quickstart"
	// readme is the page the quick start must be on, relative to root.
	readme = "README.md"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// pages returns the pages whose Go blocks are checked, relative to root:
// README.md and docs/*.md.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	out := []string{readme}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		require.NoError(t, err)
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

// goBlocks returns the ```go blocks of page (relative to root), each with
// the line it starts on.
func goBlocks(t *testing.T, page string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, page))
	require.NoError(t, err)
	blocks := map[string]int{}
	var cur []string
	in, start := false, 0
	for i, line := range strings.Split(string(b), "\n") {
		switch {
		case !in && strings.TrimSpace(line) == "```go":
			in, start, cur = true, i+2, nil
		case in && strings.TrimSpace(line) == "```":
			in = false
			blocks[normalize(cur)] = start
		case in:
			cur = append(cur, line)
		}
	}
	require.False(t, in, "%s:%d: a go block is not closed", page, start)
	return blocks
}

// allBlocks returns the Go blocks of every page, each with where it is
// (page:line, all of them).
func allBlocks(t *testing.T) map[string][]string {
	t.Helper()
	all := map[string][]string{}
	for _, p := range pages(t) {
		for b, line := range goBlocks(t, p) {
			all[b] = append(all[b], p+":"+strconv.Itoa(line))
		}
	}
	for _, where := range all {
		slices.Sort(where)
	}
	return all
}

// region is a piece of compiled code a block may be.
type region struct {
	where string // file:line
	fn    string // the Example it is in, or the program
}

// exampleRegions returns the marked regions of every *example_test.go.
func exampleRegions(t *testing.T) map[string]region {
	t.Helper()
	regions := map[string]region{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(d.Name(), "example_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		return scanRegions(t, path, filepath.ToSlash(rel), regions)
	})
	require.NoError(t, err)
	return regions
}

// scanRegions adds the marked regions of the file at path (rel, for
// messages) to regions.
func scanRegions(t *testing.T, path, rel string, regions map[string]region) error {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var (
		fn    string
		cur   []string
		in    bool
		start int
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "func "):
			fn = strings.TrimPrefix(line, "func ")
			fn, _, _ = strings.Cut(fn, "(")
		case trimmed == "// README begin":
			assert.True(t, strings.HasPrefix(fn, "Example"), "%s:%d: a README region outside an Example function (in %q)", rel, n, fn)
			assert.False(t, in, "%s:%d: README begin inside a region", rel, n)
			in, start, cur = true, n, nil
		case trimmed == "// README end":
			assert.True(t, in, "%s:%d: README end without a begin", rel, n)
			in = false
			regions[normalize(cur)] = region{where: rel + ":" + strconv.Itoa(start), fn: fn}
		case in:
			cur = append(cur, line)
		}
	}
	assert.False(t, in, "%s:%d: README region not ended", rel, start)
	return sc.Err()
}

// quickstartBlock returns the quick start program, whole, as a block.
func quickstartBlock(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, quickstart, "main.go"))
	require.NoError(t, err)
	return normalize(strings.Split(string(b), "\n"))
}

// normalize drops the indentation the lines share, trailing blanks, and
// blank lines at either end.
func normalize(lines []string) string {
	for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	indent := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, "\t"))
		if indent < 0 || n < indent {
			indent = n
		}
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		if len(l) >= indent && indent > 0 {
			l = l[indent:]
		}
		out[i] = strings.TrimRight(l, " \t")
	}
	return strings.Join(out, "\n")
}

// TestReadmeBlocksCompile: the Go of the README and of docs/ and the
// compiled code do not drift apart.
func TestReadmeBlocksCompile(t *testing.T) {
	blocks := allBlocks(t)
	regions := exampleRegions(t)
	require.NotEmpty(t, goBlocks(t, readme), "no go blocks found in %s", readme)

	qs := quickstartBlock(t)
	regions[qs] = region{where: quickstart + "/main.go", fn: "the whole program"}
	assert.True(t, slices.ContainsFunc(blocks[qs], func(w string) bool { return strings.HasPrefix(w, readme+":") }),
		"%s/main.go is not, whole, a go block of %s", quickstart, readme)

	for b, where := range blocks {
		_, ok := regions[b]
		assert.True(t, ok, "%s: this block has no compiled twin (a region between \"// README begin\" and "+
			"\"// README end\" in an Example of an *example_test.go, or the whole of %s/main.go):\n%s",
			strings.Join(where, ", "), quickstart, b)
	}
	for r, where := range regions {
		_, ok := blocks[r]
		assert.True(t, ok, "%s (%s): this region is not a go block of README.md or docs/*.md as it is here:\n%s",
			where.where, where.fn, r)
	}
}

// TestReadmeQuickstartRuns builds the README's first program and runs it
// against a redis-server of its own: it must do its work under the lock,
// exit 0, and leave the lock free.
func TestReadmeQuickstartRuns(t *testing.T) {
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	bin := filepath.Join(t.TempDir(), "quickstart")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./"+quickstart)
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build ./%s:\n%s", quickstart, out)

	runCtx, cancelRun := context.WithTimeout(ctx, 30*time.Second)
	defer cancelRun()
	run := exec.CommandContext(runCtx, bin)
	run.Env = append(os.Environ(), "RELOCK_REDIS="+srv.Addr)
	var stdout, stderr strings.Builder
	run.Stdout, run.Stderr = &stdout, &stderr
	err = run.Run()
	require.NoError(t, err, "quickstart with RELOCK_REDIS=%s; stderr:\n%s", srv.Addr, stderr.String())
	assert.Equal(t, "settling order 42\n", stdout.String(), "quickstart's output")
	assert.Empty(t, stderr.String(), "quickstart's stderr")

	n, err := srv.Do(ctx, "EXISTS", "orders:42")
	require.NoError(t, err)
	held, err := n.AsInt64()
	require.NoError(t, err)
	assert.Zero(t, held, "the lock orders:42 is still in Redis after the program ended")
}
