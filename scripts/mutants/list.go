package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
)

// Mutant is one entry of the list: a bug put back into one file, and the
// tests that must fail because of it.
type Mutant struct {
	ID    string
	File  string // slash-separated, relative to the repository root
	Desc  string
	Old   string // the exact text replaced; it must occur once in File
	New   string
	Tests []TestRun
	Line  int // of the entry in the list, for messages
}

// TestRun is one go test command of a mutant: a package and the
// top-level tests run in it.
type TestRun struct {
	Pkg   string
	Names []string
}

// Pattern is the -run pattern that runs exactly the named top-level tests.
func (r TestRun) Pattern() string {
	return "^(" + strings.Join(r.Names, "|") + ")$"
}

var (
	idPattern   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)
	testPattern = regexp.MustCompile(`^(Test|Example|Fuzz)[A-Za-z0-9_]*$`)
)

// parseList reads the mutant list. Its format, line by line:
//
//	# a comment (only outside old and new blocks)
//	mutant <id>
//	file <path of the file to change>
//	desc <one line: what the bug breaks>
//	test <package> <TestName> [<TestName>...]   (one or more lines)
//	old
//	|<a line of the exact text to replace>      (one or more lines)
//	new
//	|<a line of its replacement>                (zero or more lines)
//	end
//
// Text lines start with '|', which is dropped: what follows is taken as
// is, tabs and trailing spaces included; the lines are joined with "\n"
// and the text has no final newline unless a last '|' line is empty.
func parseList(r io.Reader) ([]Mutant, error) {
	var (
		list  []Mutant
		cur   *Mutant
		block *string // the text being read, old or new
		text  []string
		seen  = map[string]bool{}
		n     int
	)
	flush := func() {
		if block != nil {
			*block = strings.Join(text, "\n")
			block, text = nil, nil
		}
	}
	errf := func(format string, args ...any) error {
		return fmt.Errorf("list line %d: %s", n, fmt.Sprintf(format, args...))
	}
	var gotOld, gotNew bool
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.HasPrefix(line, "|") {
			if block == nil {
				return nil, errf("text line outside an old or new block")
			}
			text = append(text, line[1:])
			continue
		}
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			if block != nil {
				return nil, errf("a text block's lines must all start with '|'")
			}
			continue
		}
		key, val, _ := strings.Cut(trimmed, " ")
		val = strings.TrimSpace(val)
		if key == "mutant" {
			if cur != nil {
				return nil, errf("mutant %s has no end", cur.ID)
			}
			if !idPattern.MatchString(val) {
				return nil, errf("bad mutant id %q", val)
			}
			if seen[val] {
				return nil, errf("mutant id %s used twice", val)
			}
			seen[val] = true
			cur = &Mutant{ID: val, Line: n}
			gotOld, gotNew = false, false
			continue
		}
		if cur == nil {
			return nil, errf("%q outside a mutant entry", key)
		}
		flush()
		switch key {
		case "file":
			if val == "" || strings.HasPrefix(val, "/") || strings.Contains(val, "..") {
				return nil, errf("bad file %q: a path relative to the repository root", val)
			}
			cur.File = val
		case "desc":
			cur.Desc = val
		case "test":
			f := strings.Fields(val)
			if len(f) < 2 || !strings.HasPrefix(f[0], "./") {
				return nil, errf("test wants a package (./dir/) and at least one test name")
			}
			for _, name := range f[1:] {
				if !testPattern.MatchString(name) {
					return nil, errf("bad test name %q (top-level tests only)", name)
				}
			}
			cur.Tests = append(cur.Tests, TestRun{Pkg: f[0], Names: f[1:]})
		case "old":
			if gotOld {
				return nil, errf("two old blocks")
			}
			gotOld, block = true, &cur.Old
		case "new":
			if gotNew {
				return nil, errf("two new blocks")
			}
			gotNew, block = true, &cur.New
		case "end":
			switch {
			case cur.File == "":
				return nil, errf("mutant %s has no file", cur.ID)
			case cur.Desc == "":
				return nil, errf("mutant %s has no desc", cur.ID)
			case len(cur.Tests) == 0:
				return nil, errf("mutant %s has no test", cur.ID)
			case !gotOld || cur.Old == "":
				return nil, errf("mutant %s has no old text", cur.ID)
			case !gotNew:
				return nil, errf("mutant %s has no new block", cur.ID)
			case cur.Old == cur.New:
				return nil, errf("mutant %s changes nothing", cur.ID)
			}
			list = append(list, *cur)
			cur = nil
		default:
			return nil, errf("unknown key %q", key)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur != nil {
		return nil, fmt.Errorf("list: mutant %s has no end", cur.ID)
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("list: no mutant")
	}
	return list, nil
}

// apply returns src with m's old text replaced, or an error when the old
// text does not occur exactly once (the list has rotted, or the text is
// ambiguous: make it longer).
func (m Mutant) apply(src string) (string, error) {
	switch c := strings.Count(src, m.Old); c {
	case 1:
		return strings.Replace(src, m.Old, m.New, 1), nil
	case 0:
		return "", fmt.Errorf("mutant %s (list line %d): its old text is not in %s", m.ID, m.Line, m.File)
	default:
		return "", fmt.Errorf("mutant %s (list line %d): its old text occurs %d times in %s; make it unique", m.ID, m.Line, c, m.File)
	}
}

// show prints m as a diff of its file and the go test commands that must
// fail once it is applied, for running it by hand.
func (m Mutant) show(timeout time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s: %s\n--- %s\n+++ %s (mutant %s)\n", m.ID, m.Desc, m.File, m.File, m.ID)
	for _, l := range strings.Split(m.Old, "\n") {
		fmt.Fprintf(&b, "-%s\n", l)
	}
	if m.New != "" {
		for _, l := range strings.Split(m.New, "\n") {
			fmt.Fprintf(&b, "+%s\n", l)
		}
	}
	for _, tr := range m.Tests {
		fmt.Fprintf(&b, "go test -race -count=1 -timeout %v -run '%s' %s\n", timeout, tr.Pattern(), tr.Pkg)
	}
	return b.String() + "\n"
}
