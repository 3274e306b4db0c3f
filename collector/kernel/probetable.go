package kernel

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteProbeTable writes one line per probe: its name, state, hook, what a
// fallback loses and why it is not attached as such. `drainwatch trace`
// prints it at start; the kernel matrix prints it when a count is wrong.
func WriteProbeTable(w io.Writer, probes []ProbeStatus) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROBE\tSTATE\tHOOK\tLOSES\tDETAIL")
	for _, p := range probes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Name, p.State, p.Hook, dash(p.Loses), dash(p.Detail))
	}
	tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
