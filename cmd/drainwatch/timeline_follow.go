package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/drainwatch/drainwatch/exporter"
)

// followCmd is `timeline --follow`: it asks the daemons every --interval
// until interrupted, each query bounded by --timeout.
func (f timelineFlags) followCmd(daemons []exporter.Daemon, filter exporter.Filter, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	follow(ctx, follower{daemons: daemons, filter: filter, format: f.format, interval: f.interval, timeout: f.timeout,
		stdout: stdout, stderr: stderr})
	return 0
}

// follower prints the terminations that are new, or changed since they were
// last printed (a termination in progress completes), once per poll.
type follower struct {
	daemons  []exporter.Daemon
	filter   exporter.Filter
	format   string
	interval time.Duration
	timeout  time.Duration
	polls    int // stop after this many queries; 0: until ctx ends (tests bound it)
	stdout   io.Writer
	stderr   io.Writer
}

// follow runs the polls. A daemon that does not answer one poll is
// reported and asked again at the next.
func follow(ctx context.Context, fl follower) {
	printed := map[string]string{} // termination key -> the JSON last printed
	for poll := 1; ; poll++ {
		qctx, cancel := context.WithTimeout(ctx, fl.timeout)
		views, errs := exporter.QueryDaemons(qctx, fl.daemons, fl.filter)
		cancel()
		printDaemonErrors(fl.stderr, errs)
		var changed []exporter.TerminationView
		for _, v := range views {
			data, _ := json.Marshal(v)
			if printed[v.Key()] != string(data) {
				printed[v.Key()] = string(data)
				changed = append(changed, v)
			}
		}
		if err := fl.print(changed, poll == 1); err != nil {
			fmt.Fprintln(fl.stderr, "drainwatch timeline:", err)
			return
		}
		if fl.polls > 0 && poll >= fl.polls {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(fl.interval):
		}
	}
}

// print writes a poll's terminations: JSON as one object a line, YAML as a
// document each, wide as rows under one header, text as timelines.
func (fl follower) print(views []exporter.TerminationView, first bool) error {
	switch fl.format {
	case "wide":
		if len(views) == 0 && !first {
			return nil
		}
		return writeWide(fl.stdout, views, first)
	case "json":
		enc := json.NewEncoder(fl.stdout)
		for _, v := range views {
			if err := enc.Encode(v); err != nil {
				return err
			}
		}
		return nil
	case "yaml":
		for _, v := range views {
			if _, err := fmt.Fprintln(fl.stdout, "---"); err != nil {
				return err
			}
			if err := printYAML(fl.stdout, exporter.TerminationList{Terminations: []exporter.TerminationView{v}}); err != nil {
				return err
			}
		}
		return nil
	}
	if len(views) == 0 {
		return nil
	}
	return exporter.WriteTimelines(fl.stdout, views)
}
