package collector

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"abc", 3, "abc"},
		{"abcd", 3, "abc"},
		{"", 3, ""},
		{"aé", 2, "a"},   // é is 2 bytes: not cut in half
		{"a€b", 3, "a"},  // € is 3 bytes
		{"a€b", 4, "a€"}, //
		{"a\xffb", 5, "a\uFFFDb"},
		{"a\xffb", 3, "a"}, // the replacement is 3 bytes
		{strings.Repeat("x", 300), MaxValueBytes, strings.Repeat("x", MaxValueBytes)},
	} {
		got := Truncate(tc.in, tc.max)
		if got != tc.want || len(got) > tc.max || !utf8.ValidString(got) {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}
