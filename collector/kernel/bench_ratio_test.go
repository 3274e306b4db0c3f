package kernel

import (
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// BenchmarkLoopbackChurnRatio interleaves the three modes of
// BenchmarkLoopbackChurn round by round in one namespace, so a busy machine
// (other jobs, CPU frequency) affects them alike, and reports the median
// throughput ratios against no probes (median cost without probes over
// median cost with them), by wall time and by the thread's CPU
// time (user+system, which includes the loopback softirq work done in the
// connecting thread and is insensitive to other processes' load):
//
//	go test -run '^$' -bench LoopbackChurnRatio -benchtime 1x ./collector/kernel/
func BenchmarkLoopbackChurnRatio(b *testing.B) {
	const rounds, conns = 41, 2000
	ns := newChurnNetns(b)
	var wall, cpu [4][]float64
	for b.Loop() {
		for r := 0; r < rounds; r++ {
			// Rotate the order so no mode always runs first or last.
			for i := 0; i < 4; i++ {
				mode := (r + i) % 4
				w, c, _ := churnMode(b, ns.Inode(), mode, func() (int64, int64) { return churnTimed(b, ns, conns) })
				wall[mode], cpu[mode] = append(wall[mode], w), append(cpu[mode], c)
			}
		}
	}
	b.ReportMetric(median(wall[0])/conns, "ns/conn_no_probes")
	b.ReportMetric(median(cpu[0])/conns, "cpu_ns/conn_no_probes")
	b.ReportMetric(median(wall[0])/median(wall[1]), "wall_ratio_unwatched")
	b.ReportMetric(median(wall[0])/median(wall[2]), "wall_ratio_watched")
	b.ReportMetric(median(cpu[0])/median(cpu[1]), "cpu_ratio_unwatched")
	b.ReportMetric(median(cpu[0])/median(cpu[2]), "cpu_ratio_watched")
	// Other jobs only ever add time: the least disturbed round of each
	// mode is the best estimate of its own cost on a busy machine.
	b.ReportMetric(slices.Min(cpu[0])/slices.Min(cpu[1]), "cpu_min_ratio_unwatched")
	b.ReportMetric(slices.Min(cpu[0])/slices.Min(cpu[2]), "cpu_min_ratio_watched")
	// Mode 3 repeats mode 0: its ratio is the benchmark's own noise.
	b.ReportMetric(median(cpu[0])/median(cpu[3]), "cpu_ratio_control")
	b.ReportMetric(slices.Min(cpu[0])/slices.Min(cpu[3]), "cpu_min_ratio_control")
}

// BenchmarkProbeRuntime reports the kernel's own accounting of the probes'
// run time per connection (kernel.bpf_stats_enabled, which itself adds two
// clock reads per program run, hence not enabled in the ratio benchmark).
// It counts every socket of the node during the churn: an upper bound.
//
//	go test -run '^$' -bench ProbeRuntime -benchtime 1x ./collector/kernel/
func BenchmarkProbeRuntime(b *testing.B) {
	const rounds, conns = 9, 4000
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		b.Fatal(err)
	}
	defer stats.Close()
	ns := newChurnNetns(b)
	var bpfNs [3][]float64
	for b.Loop() {
		for r := 0; r < rounds; r++ {
			for mode := 1; mode < 3; mode++ {
				_, _, p := churnMode(b, ns.Inode(), mode, func() (int64, int64) { return churnTimed(b, ns, conns) })
				bpfNs[mode] = append(bpfNs[mode], p)
			}
		}
	}
	b.ReportMetric(median(bpfNs[1])/conns, "bpf_ns/conn_unwatched")
	b.ReportMetric(median(bpfNs[2])/conns, "bpf_ns/conn_watched")
}

// churnMode runs fn with no probes (0 and 3, the control), probes and
// nothing watched (1) or probes watching netns (2).
func churnMode(b *testing.B, netns uint32, mode int, fn func() (int64, int64)) (wall, cpu, bpfNs float64) {
	if mode == 0 || mode == 3 {
		w, c := fn()
		return float64(w), float64(c), 0
	}
	k, err := Open(Options{Logger: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	defer k.Close()
	go func() {
		for range k.Events() {
		}
	}()
	if mode == 2 {
		if err := k.WatchNetns(netns); err != nil {
			b.Fatal(err)
		}
	}
	before := k.programRuntime(b)
	w, c := fn()
	return float64(w), float64(c), float64(k.programRuntime(b) - before)
}

// programRuntime sums the kernel's run time of every loaded program
// (kernel.bpf_stats_enabled must be on).
func (k *Kernel) programRuntime(b *testing.B) time.Duration {
	var sum time.Duration
	for _, c := range k.colls {
		for _, p := range c.Programs {
			st, err := p.Stats()
			if err != nil {
				b.Fatal(err)
			}
			sum += st.Runtime
		}
	}
	return sum
}

// churnTimed runs n cycles inside ns and returns wall and thread CPU ns.
func churnTimed(b *testing.B, ns interface{ Do(func() error) error }, n int) (wall, cpu int64) {
	err := ns.Do(func() error {
		lfd, addr, err := loopbackListener()
		if err != nil {
			return err
		}
		defer unix.Close(lfd)
		// One CPU for the thread and its loopback softirqs: no migration
		// noise between modes. The thread is the locked one of Do.
		restore, err := pinThread()
		if err != nil {
			return err
		}
		defer restore()
		w0, c0 := clockNs(unix.CLOCK_MONOTONIC), clockNs(unix.CLOCK_THREAD_CPUTIME_ID)
		for i := 0; i < n; i++ {
			if err := connectAcceptClose(lfd, addr); err != nil {
				return err
			}
		}
		wall, cpu = clockNs(unix.CLOCK_MONOTONIC)-w0, clockNs(unix.CLOCK_THREAD_CPUTIME_ID)-c0
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return wall, cpu
}

func pinThread() (restore func(), err error) {
	var orig, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &orig); err != nil {
		return nil, err
	}
	one.Set(0)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		return nil, err
	}
	return func() { _ = unix.SchedSetaffinity(0, &orig) }, nil
}

func clockNs(clock int32) int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(clock, &ts)
	return ts.Nano()
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
