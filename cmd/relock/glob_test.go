package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"*", "", true},
		{"*", "abc", true},
		{"a*c", "abbbc", true},
		{"a*c", "abbbd", false},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"[abc]x", "bx", true},
		{"[^abc]x", "bx", false},
		{"[a-c]x", "cx", true},
		{"[a-c]x", "dx", false},
		{`a\*`, "a*", true},
		{`a\*`, "ab", false},
		{"orders:*", "orders:42", true},
		{"orders:*", "order:42", false},
		{"*{eu}", "jobs{eu}", true},
		{"**x", "abx", true},
	} {
		assert.Equal(t, tc.want, globMatch(tc.pattern, tc.s), "globMatch(%q, %q)", tc.pattern, tc.s)
	}
}
