// Package docpage writes generated blocks into the documentation pages: the
// markers that delimit them, and the Markdown tables of the references
// (metrics, flags, chart values). tools/docgen and the tests that check the
// pages against the code share it.
package docpage

import (
	"fmt"
	"strings"
)

// FixCommand is what rewrites every generated block.
const FixCommand = "make docs"

func begin(name string) string {
	return "<!-- generated:" + name + " begin (" + FixCommand + " rewrites this block; do not edit it by hand) -->"
}

func end(name string) string { return "<!-- generated:" + name + " end -->" }

// Replace returns page with the block between name's markers set to body.
func Replace(page, name, body string) (string, error) {
	b, e := begin(name), end(name)
	i := strings.Index(page, b)
	j := strings.Index(page, e)
	if i < 0 || j < i {
		return "", fmt.Errorf("no block %q: the page needs the lines %q and %q", name, b, e)
	}
	return page[:i+len(b)] + "\n" + strings.TrimRight(body, "\n") + "\n" + page[j:], nil
}

// Block is an empty block of that name, for a page to hold.
func Block(name string) string { return begin(name) + "\n" + end(name) + "\n" }

// Cell escapes text for a Markdown table cell: a pipe would end the cell,
// and <pid> would read as an HTML tag.
func Cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "<", "&lt;", ">", "&gt;").Replace(s)
}

// Code is s as inline code in a table cell ("" for an empty s).
func Code(s string) string {
	if s == "" {
		return ""
	}
	return "`" + strings.ReplaceAll(s, "|", `\|`) + "`"
}

// FirstDiff names the first line where committed and generated differ.
func FirstDiff(committed, generated string) string {
	a, b := strings.Split(committed, "\n"), strings.Split(generated, "\n")
	for i := range max(len(a), len(b)) {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  committed: %s\n  generated: %s", i+1, x, y)
		}
	}
	return ""
}
