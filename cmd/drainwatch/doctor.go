package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/drainwatch/drainwatch/daemon"
)

// A check's outcome. Only fail makes `drainwatch doctor` exit non-zero: a
// warn is something the daemon works without (less precisely), a skip a
// check that had nothing to check (no kubeconfig outside a cluster).
const (
	checkOK   = "ok"
	checkWarn = "warn"
	checkFail = "fail"
	checkSkip = "skip"
)

// checkResult is one line of `drainwatch doctor`.
type checkResult struct {
	Check  string `json:"check"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

type doctorFlags struct {
	output, nodeName, kubeconfig, pinPath, cgroupRoot string
}

// doctorFlagSet builds `drainwatch doctor`'s flags into f without parsing
// them (commands.go lists it for the CLI reference).
func doctorFlagSet(f *doctorFlags, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("drainwatch doctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.output, "output", "text", "text (one line per check) or json")
	fs.StringVar(&f.nodeName, "node-name", os.Getenv("NODE_NAME"), "this node's name, as drainwatch run takes it (env NODE_NAME)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file; empty: in-cluster config when in a pod, else API checks are skipped (env KUBECONFIG)")
	fs.StringVar(&f.pinPath, "pin-path", envOr("DRAINWATCH_PIN_PATH", daemon.DefaultPinPath), "the bpffs directory drainwatch run pins to (env DRAINWATCH_PIN_PATH)")
	fs.StringVar(&f.cgroupRoot, "cgroup-root", os.Getenv("DRAINWATCH_CGROUP_ROOT"), "cgroup2 mount; empty: found in /proc/self/mountinfo (env DRAINWATCH_CGROUP_ROOT)")
	return fs
}

func parseDoctorFlags(args []string, stderr io.Writer) (doctorFlags, error) {
	var f doctorFlags
	fs := doctorFlagSet(&f, stderr)
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("drainwatch doctor takes no arguments, got %q", fs.Args())
	}
	if f.output != "text" && f.output != "json" {
		return f, fmt.Errorf("--output %q: want text or json", f.output)
	}
	return f, nil
}

// doctorCmd is `drainwatch doctor`: can the daemon work on this node, and
// if not, what to change. It returns 1 when a check failed.
func doctorCmd(args []string, stdout, stderr io.Writer) int {
	f, err := parseDoctorFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "drainwatch doctor:", err)
		return 2
	}
	results := runChecks(hostEnv(f))
	if err := writeResults(stdout, f.output, results); err != nil {
		fmt.Fprintln(stderr, "drainwatch doctor:", err)
		return 2
	}
	return exitCode(results)
}

func exitCode(results []checkResult) int {
	for _, r := range results {
		if r.Status == checkFail {
			return 1
		}
	}
	return 0
}

func writeResults(w io.Writer, format string, results []checkResult) error {
	if format == "json" {
		e := json.NewEncoder(w)
		e.SetIndent("", "  ")
		return e.Encode(struct {
			OK     bool          `json:"ok"`
			Checks []checkResult `json:"checks"`
		}{exitCode(results) == 0, results})
	}
	for _, r := range results {
		line := fmt.Sprintf("%-4s  %-28s %s", r.Status, r.Check, r.Detail)
		if r.Fix != "" {
			line += "\n      fix: " + r.Fix
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}
