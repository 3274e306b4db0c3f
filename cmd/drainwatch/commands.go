package main

import (
	"flag"
	"io"

	"github.com/drainwatch/drainwatch/advise"
)

// command is a subcommand and its flags, built without parsing: the CLI
// reference (docs/cli.md) is written from this list, and a test fails when
// the usage text names a command the list lacks.
type command struct {
	name string
	// flags is nil for a command without flags (version, help).
	flags func(stderr io.Writer) *flag.FlagSet
}

var commands = []command{
	{name: "run", flags: func(w io.Writer) *flag.FlagSet { return runFlagSet(new(runFlags), w) }},
	{name: "trace", flags: func(w io.Writer) *flag.FlagSet { return traceFlagSet(new(traceFlags), w) }},
	{name: "timeline", flags: func(w io.Writer) *flag.FlagSet { return timelineFlagSet(new(timelineFlags), w) }},
	{name: "advise", flags: func(w io.Writer) *flag.FlagSet {
		return adviseFlagSet(&adviseFlags{rule: advise.DefaultRule}, w)
	}},
	{name: "rollout", flags: func(w io.Writer) *flag.FlagSet { return rolloutFlagSet(new(rolloutFlags), w) }},
	{name: "cleanup", flags: func(w io.Writer) *flag.FlagSet { fs, _, _ := cleanupFlagSet(w); return fs }},
	{name: "doctor", flags: func(w io.Writer) *flag.FlagSet { return doctorFlagSet(new(doctorFlags), w) }},
	{name: "version"},
	{name: "help"},
}
