package docpage

import (
	"flag"
	"fmt"
	"strings"
)

// FlagsTable is the Markdown table of a command's flags: name, type,
// default, usage, in the flag set's (alphabetical) order.
func FlagsTable(fs *flag.FlagSet) string {
	var b strings.Builder
	b.WriteString("| flag | type | default | description |\n|---|---|---|---|\n")
	fs.VisitAll(func(f *flag.Flag) {
		typ, usage := flag.UnquoteUsage(f)
		if typ == "" {
			typ = "bool"
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s | %s |\n", f.Name, typ, Code(f.DefValue), Cell(usage))
	})
	return b.String()
}
