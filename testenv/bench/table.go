package bench

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// spread is the median and the range of a set of values.
type spread struct{ Median, Min, Max float64 }

func spreadOf(v []float64) spread {
	if len(v) == 0 {
		return spread{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{Median: m, Min: s[0], Max: s[len(s)-1]}
}

// row is one (load, mode) line of the table.
type row struct {
	load  string
	mode  Mode
	ratio spread // throughput / the same round's no-drainwatch throughput
	rps   spread
	// Medians over rounds, in µs.
	serverPerReq, clientPerReq, daemonPerConn, daemonPerReq float64
	serverRatio                                             spread // nginx CPU per request / the round's no-drainwatch one
	errors                                                  uint64
}

func rows(samples []Sample) []row {
	var out []row
	for _, load := range []string{"close", "keep-alive"} {
		base := map[int]Sample{}
		for _, s := range samples {
			if s.Load == load && s.Mode == ModeOff {
				base[s.Round] = s
			}
		}
		for _, mode := range Modes {
			out = append(out, rowOf(load, mode, samples, base))
		}
	}
	return out
}

func rowOf(load string, mode Mode, samples []Sample, base map[int]Sample) row {
	r := row{load: load, mode: mode}
	var ratio, rps, srvRatio, srv, cli, dConn, dReq []float64
	for _, s := range samples {
		if s.Load != load || s.Mode != mode {
			continue
		}
		b := base[s.Round]
		ratio = append(ratio, s.Throughput()/b.Throughput())
		srvRatio = append(srvRatio, perReq(s.ServerCPU, s.Requests)/perReq(b.ServerCPU, b.Requests))
		rps = append(rps, s.Throughput())
		srv = append(srv, perReq(s.ServerCPU, s.Requests))
		cli = append(cli, perReq(s.ClientCPU, s.Requests))
		dConn = append(dConn, perReq(s.DaemonCPU, s.Connections))
		dReq = append(dReq, perReq(s.DaemonCPU, s.Requests))
		r.errors += s.Errors
	}
	r.ratio, r.rps, r.serverRatio = spreadOf(ratio), spreadOf(rps), spreadOf(srvRatio)
	r.serverPerReq, r.clientPerReq = spreadOf(srv).Median, spreadOf(cli).Median
	r.daemonPerConn, r.daemonPerReq = spreadOf(dConn).Median, spreadOf(dReq).Median
	return r
}

// perReq is d per n in µs.
func perReq(d time.Duration, n uint64) float64 {
	if n == 0 {
		return 0
	}
	return float64(d.Nanoseconds()) / 1e3 / float64(n)
}

// Print writes the compact table: per load and mode the throughput ratio
// against no drainwatch (median [min–max] over rounds), the medians of
// requests/s and of CPU per request or connection in µs.
func (r Report) Print(w io.Writer, rounds int) {
	if len(r.Samples) == 0 {
		r.printRSS(w)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "load\tmode\tthroughput ratio (median [min-max], %d rounds)\treq/s\tnginx µs/req (ratio)\twrk µs/req\tdaemon µs/conn\tdaemon µs/req\terrors\n", rounds)
	for _, x := range rows(r.Samples) {
		fmt.Fprintf(tw, "%s\t%s\t%.3f [%.3f-%.3f]\t%.0f\t%.1f (%.3f)\t%.1f\t%.2f\t%.2f\t%d\n", x.load, x.mode,
			x.ratio.Median, x.ratio.Min, x.ratio.Max, x.rps.Median, x.serverPerReq, x.serverRatio.Median,
			x.clientPerReq, x.daemonPerConn, x.daemonPerReq, x.errors)
	}
	tw.Flush()
	r.printRSS(w)
}

func (r Report) printRSS(w io.Writer) {
	mib := func(kib int) float64 { return float64(kib) / 1024 }
	for _, m := range r.RSS {
		idle := ""
		if m.IdleCPU > 0 {
			idle = fmt.Sprintf("; idle CPU %.1f ms/s since the previous reading", float64(m.IdleCPU)/float64(time.Millisecond))
		}
		fmt.Fprintf(w, "RSS with %d pods on the node, %v after they run: VmRSS %.1f MiB (anon %.1f, file %.1f, shmem %.1f), VmHWM %.1f MiB%s\n",
			m.Pods, m.After, mib(m.RSS), mib(m.Anon), mib(m.File), mib(m.Shmem), mib(m.HWM), idle)
		for _, k := range m.Mappings {
			if k.RSS >= 64 {
				fmt.Fprintf(w, "    %-36s %6.1f MiB (anonymous %.1f)\n", k.Kind, mib(k.RSS), mib(k.Anon))
			}
		}
	}
}
