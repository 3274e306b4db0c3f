package scale

import (
	"fmt"
	"strings"
	"text/tabwriter"
)

// Report is a whole run: its sizes and one Result per design.
type Report struct {
	Config  Config
	Pods    int // pods rolled per rollout
	Results []Result
}

// baseline is the run without daemons, when there was one.
func (r Report) baseline() (Result, bool) {
	for _, res := range r.Results {
		if res.Design == None {
			return res, true
		}
	}
	return Result{}, false
}

// Table prints one column per design; "per daemon" rows divide by the
// daemon count, "above none" rows subtract the run without daemons.
func (r Report) Table() string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	base, hasBase := r.baseline()
	row := func(name string, f func(Result) string) {
		fmt.Fprintf(tw, "%s\t", name)
		for _, res := range r.Results {
			fmt.Fprintf(tw, "%s\t", f(res))
		}
		fmt.Fprintln(tw)
	}
	row("design", func(x Result) string { return string(x.Design) })
	row("daemons", func(x Result) string { return fmt.Sprint(x.Daemons) })
	row("rollout (s)", func(x Result) string {
		if x.Incomplete {
			return fmt.Sprintf("> %.0f, not complete", x.Rollout.Seconds())
		}
		return fmt.Sprintf("%.0f", x.Rollout.Seconds())
	})
	r.watchRows(row)
	r.clientRows(row)
	r.serverRows(row, base, hasBase)
	_ = tw.Flush()
	return b.String()
}

type rowFunc func(name string, f func(Result) string)

func (r Report) watchRows(row rowFunc) {
	row("API server: watches served, idle (control plane)", func(x Result) string { return fmt.Sprintf("%.0f", x.Server.IdleWatches) })
	row("API server: watches served, peak", func(x Result) string { return fmt.Sprintf("%.0f", x.Server.PeakWatches) })
	for _, res := range []string{"pods", "services", "endpointslices", "events"} {
		row("  "+res+": idle / peak", func(x Result) string {
			return fmt.Sprintf("%.0f / %.0f", x.Server.IdleByResource[res], x.Server.PeakByResource[res])
		})
	}
	row("daemons: watches open, peak sum", func(x Result) string { return fmt.Sprint(x.During.PeakWatches) })
	row("daemons: watches open, peak of one daemon", func(x Result) string { return fmt.Sprint(x.PeakWatchesPerDaemon) })
	row("daemons: watches opened during rollout", func(x Result) string { return fmt.Sprint(x.During.WatchRequests) })
	row("daemons: requests during rollout", func(x Result) string { return fmt.Sprint(x.During.Requests) })
	row("daemons: terminations seen / Killing Event by rollout end / within the watch", func(x Result) string {
		if x.Terminations == 0 {
			return "-"
		}
		return fmt.Sprintf("%d / %d / %d", x.Terminations, x.KillingAtEnd, x.KillingSeen)
	})
	row("daemons: Killing Event received after its time, median / max (s)", func(x Result) string {
		if x.Terminations == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f / %.1f", x.KillingDelayMedian.Seconds(), x.KillingDelayMax.Seconds())
	})
	row("  after its daemon saw the pod terminating, median / max (s)", func(x Result) string {
		if x.Terminations == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f / %.1f", x.KillingAfterWatchMedian.Seconds(), x.KillingAfterWatchMax.Seconds())
	})
	row("  missed: pod never seen terminating (no Event watch) / Event watch ran", func(x Result) string {
		if x.Terminations == 0 {
			return "-"
		}
		return fmt.Sprintf("%d / %d", x.MissedUnwatched, x.MissedWatched)
	})
	row("daemons: EndpointSlice watches started (each a list)", func(x Result) string { return fmt.Sprint(x.During.Objects.sliceWatches) })
	row("daemons: gzipped responses (watches too) during rollout", func(x Result) string { return fmt.Sprint(x.During.Gzipped) })
}

func (r Report) clientRows(row rowFunc) {
	objs := []struct {
		name string
		get  func(received) uint64
	}{{"pods", func(o received) uint64 { return o.pods }}, {"services", func(o received) uint64 { return o.services }},
		{"endpointslices", func(o received) uint64 { return o.slices }}, {"events", func(o received) uint64 { return o.events }}}
	for _, o := range objs {
		row("daemons: "+o.name+" received during rollout (total)", func(x Result) string { return fmt.Sprint(o.get(x.During.Objects)) })
		row("  per daemon", func(x Result) string { return perDaemon(float64(o.get(x.During.Objects)), x.Daemons, "%.1f") })
	}
	for i, name := range resources {
		row("daemons: "+name+" bytes received during rollout (total)", func(x Result) string { return mib(float64(x.During.BodyBytes[i])) })
		row("  per daemon (KiB)", func(x Result) string { return perDaemon(float64(x.During.BodyBytes[i])/1024, x.Daemons, "%.1f") })
	}
	row("daemons: TLS bytes on the wire during rollout (total)", func(x Result) string { return mib(float64(x.During.WireBytes)) })
	row("  per daemon (KiB)", func(x Result) string { return perDaemon(float64(x.During.WireBytes)/1024, x.Daemons, "%.1f") })
	row("daemons: TLS bytes at start, first lists (total)", func(x Result) string { return mib(float64(x.Start.WireBytes)) })
}

func (r Report) serverRows(row rowFunc, base Result, hasBase bool) {
	for _, res := range []string{"pods", "services", "endpointslices", "events"} {
		row("API server: "+res+" watch events sent, all watchers", func(x Result) string { return fmt.Sprintf("%.0f", x.Server.Events[res]) })
		row("API server: "+res+" watch bytes sent, all watchers", func(x Result) string { return mib(x.Server.Bytes[res]) })
		if hasBase {
			row("  above none, per daemon (KiB)", func(x Result) string {
				return perDaemon((x.Server.Bytes[res]-base.Server.Bytes[res])/1024, x.Daemons, "%.1f")
			})
		}
	}
	row("API server: CPU seconds during rollout", func(x Result) string { return fmt.Sprintf("%.1f", x.Server.CPUSeconds) })
	if hasBase {
		row("  above none, per daemon (ms)", func(x Result) string {
			return perDaemon((x.Server.CPUSeconds-base.Server.CPUSeconds)*1000, x.Daemons, "%.0f")
		})
	}
	row("API server: RSS before daemons", func(x Result) string { return mib(float64(x.Server.RSSIdle)) })
	row("API server: RSS peak during rollout", func(x Result) string { return mib(float64(x.Server.RSSPeak)) })
}

func mib(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }

func perDaemon(v float64, daemons int, format string) string {
	if daemons == 0 {
		return "-"
	}
	return fmt.Sprintf(format, v/float64(daemons))
}

// Text is the whole report: sizes, table, extrapolation.
func (r Report) Text() string {
	c := r.Config
	head := fmt.Sprintf("%d hollow nodes, %d pods in %d namespaces x %d deployments (%d pods each, one service each); "+
		"one rollout restart of every pod per design; hollow containers exit %s after their stop signal\n\n",
		c.Nodes, r.Pods, c.Namespaces, c.DeploymentsPerNamespace, r.podsPerDeployment(), c.StopAfter)
	return head + r.Table() + "\n" + r.Extrapolation()
}

func (r Report) podsPerDeployment() int {
	if n := r.Config.Namespaces * r.Config.DeploymentsPerNamespace; n > 0 {
		return r.Pods / n
	}
	return 0
}
