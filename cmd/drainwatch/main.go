// Command drainwatch measures, on a Kubernetes node, the connections refused
// after the stop signal and the requests killed by SIGKILL during pod
// terminations.
//
// main only dispatches to subcommands; each lives in its own file
// (trace.go, run.go, timeline.go, cleanup.go, doctor.go) and returns its
// exit code; commands.go lists them with their flag sets.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/drainwatch/drainwatch/exporter"
)

const usage = `drainwatch — did this pod termination lose traffic, and why?

Usage:
  drainwatch run     [flags]   the node daemon (Kubernetes, metrics, API)
  drainwatch trace   [flags]   stream kernel events of a netns, cgroup or pid (no Kubernetes)
  drainwatch timeline [flags]  terminations' timelines and new pods' startups from one or all daemons
  drainwatch advise  [KIND/NAME] [flags]  preStop sleep and grace period from measured routing lag and drain
  drainwatch rollout KIND/NAME [flags]    one rollout across the cluster: totals per revision, slowest source, diagnoses, advice
  drainwatch cleanup [flags]   detach the eBPF programs a stopped daemon left pinned
  drainwatch doctor  [flags]   check that this node (or pod) can run the daemon, with fixes
  drainwatch version           print the version
  drainwatch help              this text

Run "drainwatch <command> -h" for a command's flags. Linked or copied as
kubectl-drainwatch on the PATH, it is a kubectl plugin: kubectl drainwatch timeline -n shop.
`

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "run":
		return runCmd(args[1:])
	case "trace":
		return traceCmd(args[1:], stdout, stderr)
	case "timeline":
		return timelineCmd(args[1:], stdout, stderr)
	case "advise":
		return adviseCmd(args[1:], stdout, stderr)
	case "rollout":
		return rolloutCmd(args[1:], stdout, stderr)
	case "cleanup":
		return cleanupCmd(args[1:], stdout, stderr)
	case "doctor":
		return doctorCmd(args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintf(stdout, "drainwatch %s (%s)\n", exporter.Version, runtime.Version())
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "drainwatch: unknown command %q\n\n%s", args[0], usage)
	return 2
}
