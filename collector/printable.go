package collector

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxValueBytes bounds a string taken from the cluster that drainwatch
// keeps per revision (a revision, a metric label value): 253 bytes, the
// longest object name the API server accepts (a DNS subdomain), so every
// validated name fits whole. Annotations are not validated: a revision
// annotation of 256 KiB would otherwise be held, stored and served in
// every series and termination of its revision.
const MaxValueBytes = 253

// Truncate makes s valid UTF-8 (an invalid byte becomes U+FFFD) at most
// max bytes long, cut at a character boundary.
func Truncate(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// Printable returns s with every character a terminal could act on
// escaped as Go writes it (\x1b, \n, \u009b, \u202e), the rest kept as it
// is, non-ASCII letters included. Pod names, revisions, Event messages and
// command names come from the cluster and from any process on the node:
// printed raw, an escape sequence in one would drive the reader's
// terminal (move the cursor, rewrite earlier lines, set the title), and a
// newline would forge a line of output. Every terminal output writes its
// strings through Printable and adds its own newlines and tabs.
//
// Escaped: C0 controls (newline and tab too), DEL, C1 controls, the
// bidirectional overrides and isolates (which reorder what is shown), and
// bytes that are not UTF-8 (a lone 0x9b is CSI to an 8-bit terminal).
func Printable(s string) string {
	i := firstUnprintable(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for s = s[i:]; len(s) > 0; {
		r, size := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case unprintable(r):
			b.WriteString(strings.Trim(strconv.QuoteRune(r), "'"))
		default:
			b.WriteString(s[:size])
		}
		s = s[size:]
	}
	return b.String()
}

// firstUnprintable is the index of the first byte Printable escapes, -1
// when there is none (the common case: no allocation).
func firstUnprintable(s string) int {
	for i, r := range s {
		if unprintable(r) || (r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD")) {
			return i
		}
	}
	return -1
}

// unprintable is true for the characters a terminal acts on or that
// reorder the text around them.
func unprintable(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		return true
	}
	return false
}
