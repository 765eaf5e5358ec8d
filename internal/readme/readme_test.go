// Package readme_test keeps the README's Go code compiled: every ```go
// block of README.md must be, byte for byte once dedented, a region of an
// Example function in one of the repository's example_test.go files,
// marked by a "// README begin" and a "// README end" line, and every such
// region must appear in the README. The Examples compile with their
// packages (and run, when they have an Output comment).
package readme_test

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const root = "../.."

// readmeBlocks returns the ```go blocks of the README, with the line each
// starts on.
func readmeBlocks(t *testing.T) map[string]int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
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
	require.False(t, in, "README.md:%d: a go block is not closed", start)
	return blocks
}

// region is a marked region of an example file.
type region struct {
	where string // file:line
	fn    string // the Example it is in
}

// exampleRegions returns the marked regions of every example_test.go.
func exampleRegions(t *testing.T) map[string]region {
	t.Helper()
	regions := map[string]region{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != root) {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() != "example_test.go" {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		rel, _ := filepath.Rel(root, path)
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
	})
	require.NoError(t, err)
	return regions
}

// normalize drops the indentation the lines share, and blank lines at
// either end.
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

// TestReadmeBlocksCompile: the README's Go and the examples do not drift
// apart.
func TestReadmeBlocksCompile(t *testing.T) {
	blocks := readmeBlocks(t)
	regions := exampleRegions(t)
	require.NotEmpty(t, blocks, "no go blocks found in README.md")
	for b, line := range blocks {
		_, ok := regions[b]
		assert.True(t, ok, "README.md:%d: this block has no compiled twin (a region between \"// README begin\" and \"// README end\" in an Example):\n%s", line, b)
	}
	for r, where := range regions {
		_, ok := blocks[r]
		assert.True(t, ok, "%s (%s): this README region is not in README.md as it is here:\n%s", where.where, where.fn, r)
	}
}
