package tagging

import (
	"strings"
	"testing"
	"time"
)

// globRef is the textbook dynamic-programming matcher, quadratic and
// obviously right: m[i][j] says pattern[:i] matches name[:j].
func globRef(pattern, name string) bool {
	prev := make([]bool, len(name)+1)
	prev[0] = true
	for i := 1; i <= len(pattern); i++ {
		cur := make([]bool, len(name)+1)
		if pattern[i-1] == '*' {
			cur[0] = prev[0]
			for j := 1; j <= len(name); j++ {
				cur[j] = prev[j] || cur[j-1]
			}
		} else {
			for j := 1; j <= len(name); j++ {
				cur[j] = prev[j-1] && pattern[i-1] == name[j-1]
			}
		}
		prev = cur
	}
	return prev[len(name)]
}

func TestSelectGlob(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"", "", true},
		{"", "a", false},
		{"*", "", true},
		{"*", "/any/thing", true},
		{"/v1/customers*", "/v1/customers", true},
		{"/v1/customers*", "/v1/customers/{customer}/sources/{id}", true},
		{"/v1/customers*", "/v1/customer", false},
		{"/v1/customers*", "/v2/customers", false},
		{"/v1/*/{id}", "/v1/a/b/{id}", true},
		{"/v1/*/{id}", "/v1/{id}", false},
		{"a*a", "a", false}, // prefix and suffix must not overlap
		{"a*a", "aa", true},
		{"*ab*ab*", "abab", true},
		{"*ab*ab*", "aba", false},
		{"a**b", "ab", true},
		{"?", "?", true},
		{"?", "x", false}, // ? is literal
		{"[a]", "a", false},
		{"{id}", "{id}", true},
	}
	for _, tt := range tests {
		if got := glob(tt.pattern, tt.name); got != tt.want {
			t.Errorf("glob(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
		if ref := globRef(tt.pattern, tt.name); ref != tt.want {
			t.Errorf("reference disagrees with the table on (%q, %q)", tt.pattern, tt.name)
		}
	}
}

// TestSelectGlobNoBlowup runs the inputs that make a backtracking matcher
// take exponential (or with one backtrack point, quadratic) time: many stars
// that each almost match a long name. A backtracking matcher would not end in
// the lifetime of the machine; this one takes microseconds. The bound is
// generous because the machine is shared.
func TestSelectGlobNoBlowup(t *testing.T) {
	name := strings.Repeat("a", 1<<20)
	patterns := []string{
		strings.Repeat("*a", 200) + "*b*",
		strings.Repeat("a*", 200) + "b*",
		"*" + strings.Repeat("a", 5000) + "b*",
		strings.Repeat("*", 10000) + "b*a",
	}
	for _, p := range patterns {
		start := time.Now()
		if glob(p, name) {
			t.Errorf("glob(%.20q…) matched a name without b", p)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("glob(%.20q…, 1 MiB of a) took %v", p, d)
		}
	}
}

// FuzzSelectGlob checks glob against the reference matcher: no panic, the
// same answer.
func FuzzSelectGlob(f *testing.F) {
	for _, s := range [][2]string{
		{"/v1/customers*", "/v1/customers/{customer}"},
		{"*a*b*", "xaybz"},
		{"a*a", "a"},
		{"**", ""},
		{"*x*", "é*x"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if len(pattern) > 64 || len(name) > 256 {
			return // keep the reference's quadratic time small
		}
		if got, want := glob(pattern, name), globRef(pattern, name); got != want {
			t.Errorf("glob(%q, %q) = %v, reference says %v", pattern, name, got, want)
		}
	})
}
