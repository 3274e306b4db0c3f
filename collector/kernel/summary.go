package kernel

import (
	"fmt"
	"io"

	"github.com/drainwatch/drainwatch/collector"
)

// WriteSummary writes the counts per type and the lost events, as
// `drainwatch trace` ends; err is the error reading the kernel counters.
func (st Stats) WriteSummary(w io.Writer, err error) {
	fmt.Fprintln(w, "drainwatch trace summary:")
	for _, t := range collector.EventTypes() {
		fmt.Fprintf(w, "  %-22s %d\n", t, st.Events[t])
	}
	fmt.Fprintf(w, "  %-22s %d (ring buffer full: %d, reader behind: %d, undecodable: %d)\n",
		"lost", st.Lost(), st.LostInKernel, st.Dropped, st.Invalid)
	for _, t := range collector.EventTypes() {
		if n := st.LostInKernelByType[t]; n > 0 {
			fmt.Fprintf(w, "    ring buffer full, %-12s %d\n", t.String()+":", n)
		}
	}
	if err != nil {
		fmt.Fprintln(w, "  (kernel counters unavailable:", err, ")")
	}
}
