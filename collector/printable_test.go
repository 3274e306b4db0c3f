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

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"web-7d9c-x2":                 "web-7d9c-x2",
		"café ☕ 日本":                   "café ☕ 日本",
		"\x1b[2J\x1b]0;owned\x07":     `\x1b[2J\x1b]0;owned\a`,
		"line\nforged line\ttab\r":    `line\nforged line\ttab\r`,
		"del\x7f":                     `del\x7f`,
		"c1 \u009b31m csi":            `c1 \u009b31m csi`,
		"lone \x9b byte, \xff":        `lone \x9b byte, \xff`,
		"rtl \u202eevil\u202c \u2066": `rtl \u202eevil\u202c \u2066`,
		"a real \uFFFD stays":         "a real \uFFFD stays",
		"\x00nul":                     `\x00nul`,
	} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
}

// A printable string is returned as it is, without allocating: every
// terminal line passes through Printable.
func TestPrintableDoesNotAllocate(t *testing.T) {
	s := "netns=4026532 pid=3 comm=nginx"
	if n := testing.AllocsPerRun(100, func() { _ = Printable(s) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

// FuzzPrintable: whatever the input, the output is valid UTF-8 with no
// character a terminal acts on, printing it again changes nothing, and a
// printable input comes back unchanged.
func FuzzPrintable(f *testing.F) {
	for _, s := range []string{"", "web-1", "\x1b[31mred", "a\nb\tc", "\u009b\u202e", "\xff\xfe\xc3", "\xe2\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Printable(s)
		if !utf8.ValidString(out) {
			t.Fatalf("Printable(%q) = %q: not UTF-8", s, out)
		}
		clean := true
		for _, r := range s {
			clean = clean && !unprintable(r) && r != utf8.RuneError
		}
		for _, r := range out {
			if unprintable(r) {
				t.Fatalf("Printable(%q) = %q keeps %U", s, out, r)
			}
		}
		if again := Printable(out); again != out {
			t.Fatalf("Printable(%q) = %q, then %q", s, out, again)
		}
		if clean && out != s {
			t.Fatalf("printable %q became %q", s, out)
		}
	})
}
