package advise

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// WriteText writes each advice as a block: the measurements, the values
// with the numbers behind them, and the notes. Cluster strings (names,
// sources) are escaped for a terminal.
func WriteText(w io.Writer, advices []Advice) error {
	var b strings.Builder
	for i, a := range advices {
		if i > 0 {
			b.WriteString("\n")
		}
		writeBlock(&b, a)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeBlock(b *strings.Builder, a Advice) {
	fmt.Fprintf(b, "%s: %d terminations measured, %d skipped; rule: %s\n",
		collector.Printable(a.Workload.String()), a.Terminations, a.Skipped, a.Rule)
	pct := fmt.Sprintf("p%g", a.Percentile)
	row := func(name string, s Stat) {
		fmt.Fprintf(b, "  %-30s %2d terminations  p50 %s  %s %s  max %s\n", name, s.N,
			s.text(AboveP50, s.P50), pct, s.text(AboveP, s.P), s.text(AboveMax, s.Max))
	}
	row("routing lag", a.RoutingLag)
	for _, s := range a.Sources {
		row("  from "+collector.Printable(s.Source), s.Lag)
	}
	row("drain (exit − stop signal)", a.Drain)
	row("grace used (exit − deletion)", a.GraceUsed)
	if a.From == FromPrometheus {
		fmt.Fprintf(b, "  from Prometheus (values are bucket upper bounds): requests killed by SIGKILL: %d; requests reset on reuse: %d during terminations, %d outside them\n",
			a.RequestsKilledBySigkill, a.ResetsOnReuse, a.ResetsOutsideTerminations)
	} else {
		fmt.Fprintf(b, "  grace period given: %s; drains ended by SIGKILL: %d; requests reset on reuse: %d (%d before the stop signal)\n",
			sec(time.Duration(a.GracePeriod)), a.DrainCutBySigkill, a.ResetsOnReuse, a.ResetsBeforeStopSignal)
	}
	if k := a.KeepAlive; k.IdleCloses > 0 {
		fmt.Fprintf(b, "  keep-alive: the server closed %d idle connections of %d pods after %s to %s idle; a pool reused %d of them, the longest %s after its last data\n",
			k.IdleCloses, k.Pods, sec(time.Duration(k.IdleMin)), sec(time.Duration(k.IdleMax)), k.PoolReuses, sec(time.Duration(k.PoolIdleMax)))
	}
	if a.Enough {
		b.WriteString("  advice:\n")
	}
	for _, w := range a.Why {
		fmt.Fprintf(b, "    %s\n", w)
	}
	for _, n := range a.Notes {
		fmt.Fprintf(b, "  note: %s\n", n)
	}
}

// text writes one of s's values; one past the histogram's last bucket as
// ">bound".
func (s Stat) text(name string, v Seconds) string {
	if slices.Contains(s.Above, name) {
		return ">" + sec(time.Duration(v))
	}
	return sec(time.Duration(v))
}
