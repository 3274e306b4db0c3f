package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/collector/kernel"
	"github.com/drainwatch/drainwatch/collector/node"
)

// traceFlags are `drainwatch trace`'s filters and output format. With no
// filter every namespace and cgroup of the host is traced.
type traceFlags struct {
	netns, cgroup, format, logLevel string
	pid                             int
}

// traceFlagSet builds `drainwatch trace`'s flags into f without parsing
// them (commands.go lists it for the CLI reference).
func traceFlagSet(f *traceFlags, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("drainwatch trace", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.netns, "netns", "", "network namespace to watch: a path (/run/netns/NAME, /proc/PID/ns/net) or an inode number")
	fs.StringVar(&f.cgroup, "cgroup", "", "cgroup v2 directory to watch (signals and exits of its tasks), absolute or below the cgroup2 mount")
	fs.IntVar(&f.pid, "pid", 0, "watch this process's network namespace and cgroup")
	fs.StringVar(&f.format, "format", "json", "json (one object per line) or text")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error (logs go to stderr)")
	return fs
}

func parseTraceFlags(args []string, stderr io.Writer) (traceFlags, error) {
	var f traceFlags
	fs := traceFlagSet(&f, stderr)
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("drainwatch trace takes no arguments, got %q", fs.Args())
	}
	if f.format != "json" && f.format != "text" {
		return f, fmt.Errorf("--format %q: want json or text", f.format)
	}
	return f, nil
}

func (f traceFlags) watchAll() bool { return f.netns == "" && f.cgroup == "" && f.pid == 0 }

// traceCmd is `drainwatch trace`. It returns the exit code.
func traceCmd(args []string, stdout, stderr io.Writer) int {
	f, err := parseTraceFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "drainwatch trace:", err)
		return 2
	}
	level, err := zerolog.ParseLevel(f.logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "drainwatch trace: --log-level:", err)
		return 2
	}
	if err := f.checkScopes(); err != nil {
		fmt.Fprintln(stderr, "drainwatch trace:", err)
		return 2
	}
	log := zerolog.New(zerolog.ConsoleWriter{Out: stderr, NoColor: !isTerminal(stderr)}).Level(level).With().Timestamp().Logger()
	// Detail: trace shows every accept of what it watches.
	k, err := kernel.Open(kernel.Options{Logger: log, WatchAll: f.watchAll(), Detail: true})
	if err != nil {
		fmt.Fprintln(stderr, "drainwatch trace:", err)
		return 1
	}
	// The probe table first: what this kernel lets trace see, and what not.
	kernel.WriteProbeTable(stderr, k.Probes())
	if err := node.WatchFilter(k, node.Filter{PID: f.pid, Netns: f.netns, Cgroup: f.cgroup}, log); err != nil {
		k.Close()
		fmt.Fprintln(stderr, "drainwatch trace:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return streamEvents(ctx, k, f.format, stdout, stderr)
}

// streamEvents writes events until ctx ends, then closes the kernel side,
// writes what was still buffered and prints the summary to stderr.
func streamEvents(ctx context.Context, k *kernel.Kernel, format string, stdout, stderr io.Writer) int {
	w := bufio.NewWriter(stdout)
	write := collector.WriteTraceJSON
	if format == "text" {
		write = collector.WriteTraceText
	}
	events := k.Events()
	go func() {
		<-ctx.Done()
		k.Close() // closes events once the reader stopped
	}()
	for ev := range events {
		write(w, &ev)
		if len(events) == 0 {
			w.Flush() // stream promptly, batch under load
		}
	}
	w.Flush()
	st, err := k.Stats()
	st.WriteSummary(stderr, err)
	return 0
}

// isTerminal reports whether w is a character device (colours only there).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
