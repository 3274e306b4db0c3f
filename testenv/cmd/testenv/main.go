// Command testenv runs testenv's cluster outside of tests:
//
//	go run ./testenv/cmd/testenv up [--nodes N] [--real-nodes R] [--dir D] [--node-prefix P]  # prints KUBECONFIG=<path>, returns
//	go run ./testenv/cmd/testenv status [--dir D]
//	go run ./testenv/cmd/testenv down [--dir D]
//
// `up` starts a supervisor process (this binary, `supervise`) in its own
// session; it owns the control plane, the node agents and the namespaces, and
// tears everything down on SIGTERM. Its state lives in D (default
// <repo>/.cache/testenv). Needs root.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/drainwatch/drainwatch/testenv/controlplane"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	nodes := fs.Int("nodes", 2, "number of nodes (up)")
	realNodes := fs.Int("real-nodes", 0, "number of real nodes (kubelet, containerd: testenv/realnode; make realnode) besides the stand-ins (up)")
	dir := fs.String("dir", "", "state directory (default <repo>/.cache/testenv)")
	prefix := fs.String("node-prefix", "lab-", "nodes are named <prefix>1..N (up); down sweeps by these names")
	_ = fs.Parse(os.Args[2:])
	if *dir == "" {
		*dir = defaultDir()
	}
	var err error
	switch os.Args[1] {
	case "up":
		err = up(*dir, *nodes, *realNodes, *prefix)
	case "supervise":
		err = supervise(*dir, *nodes, *realNodes, *prefix)
	case "status":
		err = status(*dir)
	case "down":
		err = down(*dir)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: testenv up [--nodes N] [--real-nodes R] [--dir D] | status [--dir D] | down [--dir D]")
	os.Exit(2)
}

func defaultDir() string {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return filepath.Join(os.TempDir(), "drainwatch-testenv")
	}
	return filepath.Join(root, ".cache", "testenv")
}

var errNotUp = errors.New("no testenv cluster is up (run: testenv up)")
