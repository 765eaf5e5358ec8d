package main

import (
	"strings"
	"testing"
)

func TestParseList(t *testing.T) {
	list, err := parseList(strings.NewReader(`# a comment
mutant A1
file lua/x.lua
desc what breaks
test ./lua/ TestOne TestTwo
test ./rlock/ TestThree
old
|	if a then
|
|  x
new
end
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Fatalf("%d mutants, want 1", len(list))
	}
	m := list[0]
	if m.ID != "A1" || m.File != "lua/x.lua" || m.Desc != "what breaks" {
		t.Errorf("mutant %+v", m)
	}
	if got, want := m.Old, "\tif a then\n\n  x"; got != want {
		t.Errorf("old %q, want %q", got, want)
	}
	if m.New != "" {
		t.Errorf("new %q, want empty", m.New)
	}
	if len(m.Tests) != 2 || m.Tests[0].Pattern() != "^(TestOne|TestTwo)$" || m.Tests[1].Pkg != "./rlock/" {
		t.Errorf("tests %+v", m.Tests)
	}
	got, err := m.apply("a\n\tif a then\n\n  x\nb")
	if err != nil || got != "a\n\nb" {
		t.Errorf("apply = %q, %v", got, err)
	}
	if _, err := m.apply("nothing here"); err == nil {
		t.Error("apply of a text without the old text: no error")
	}
	if _, err := m.apply("\tif a then\n\n  x\tif a then\n\n  x"); err == nil {
		t.Error("apply of a text with the old text twice: no error")
	}
}

func TestParseListErrors(t *testing.T) {
	entry := "mutant A\nfile f.go\ndesc d\ntest ./p/ TestX\nold\n|a\nnew\n|b\nend\n"
	for _, tc := range []struct{ name, list string }{
		{"no end", strings.TrimSuffix(entry, "end\n")},
		{"twice", entry + entry},
		{"no test", strings.Replace(entry, "test ./p/ TestX\n", "", 1)},
		{"a pattern for a name", strings.Replace(entry, "TestX", "Test.*", 1)},
		{"no old", strings.Replace(entry, "old\n|a\n", "", 1)},
		{"the same text", strings.Replace(entry, "|b", "|a", 1)},
		{"an unmarked text line", strings.Replace(entry, "|a", "a", 1)},
		{"an absolute file", strings.Replace(entry, "f.go", "/f.go", 1)},
		{"empty", "# nothing\n"},
	} {
		if _, err := parseList(strings.NewReader(tc.list)); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}
