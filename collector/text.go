package collector

import (
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
