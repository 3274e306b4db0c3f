package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/drainwatch/drainwatch/collector/kernel"
	"github.com/drainwatch/drainwatch/daemon"
)

// cleanupCmd is `drainwatch cleanup`: it removes the BPF pins `drainwatch
// run` leaves so its programs collect across restarts. Run it after an
// uninstall (or use run --unpin-on-exit); it refuses pins a running daemon
// holds.
func cleanupCmd(args []string, stdout, stderr io.Writer) int {
	fs, pinPath, node := cleanupFlagSet(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	return cleanup(fs, *pinPath, *node, stdout, stderr)
}

// cleanupFlagSet builds `drainwatch cleanup`'s flags without parsing them
// (commands.go lists it for the CLI reference).
func cleanupFlagSet(stderr io.Writer) (fs *flag.FlagSet, pinPath, node *string) {
	fs = flag.NewFlagSet("drainwatch cleanup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pinPath = fs.String("pin-path", envOr("DRAINWATCH_PIN_PATH", daemon.DefaultPinPath), "the pin path drainwatch run used (env DRAINWATCH_PIN_PATH)")
	node = fs.String("node-name", "", "remove only this node's pins (default: every node's under --pin-path)")
	return fs, pinPath, node
}

// cleanup removes the pins under pinPath (of node, or of every node).
func cleanup(fs *flag.FlagSet, pinPath, node string, stdout, stderr io.Writer) int {
	if fs.NArg() > 0 || pinPath == "" {
		fmt.Fprintln(stderr, "drainwatch cleanup: takes --pin-path (non-empty) and --node-name only")
		return 2
	}
	if err := checkPinRoot(pinPath, isMountRoot); err != nil {
		fmt.Fprintln(stderr, "drainwatch cleanup:", err)
		return 2
	}
	dirs, err := pinDirs(pinPath, node)
	if err != nil {
		fmt.Fprintln(stderr, "drainwatch cleanup:", err)
		return 1
	}
	code := 0
	for _, dir := range dirs {
		if err := kernel.RemovePins(dir); err != nil {
			fmt.Fprintln(stderr, "drainwatch cleanup:", err)
			code = 1
			continue
		}
		fmt.Fprintln(stdout, "removed", dir)
	}
	if node == "" && code == 0 {
		_ = os.Remove(pinPath)
	}
	return code
}

// pinDirs lists the per-node pin directories to remove.
func pinDirs(root, node string) ([]string, error) {
	if node != "" {
		return []string{daemon.NodePinPath(root, node)}, nil
	}
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", root, err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join(root, e.Name()))
		}
	}
	return dirs, nil
}

// checkPinRoot refuses a --pin-path that is / or a mount root (the bpffs
// at /sys/fs/bpf above all): cleanup removes every directory under the pin
// path, and a bpffs root holds other programs' pins (a CNI's, systemd's).
// isRoot says whether a path is a mount root.
func checkPinRoot(pinPath string, isRoot func(string) bool) error {
	path, err := filepath.Abs(pinPath)
	if err != nil {
		return fmt.Errorf("--pin-path %s: %w", pinPath, err)
	}
	if resolved, err := filepath.EvalSymlinks(path); err == nil {
		path = resolved
	}
	if path == "/" || path == "/sys/fs/bpf" || isRoot(path) {
		return fmt.Errorf("--pin-path %s is a filesystem's root, not drainwatch's pin directory: "+
			"cleanup would remove every directory under it, other programs' pins too; "+
			"give the --pin-path drainwatch run used (default %s)", pinPath, daemon.DefaultPinPath)
	}
	return nil
}

// isMountRoot reports whether path is where a filesystem is mounted: its
// device differs from its parent's.
func isMountRoot(path string) bool {
	var st, parent syscall.Stat_t
	if syscall.Stat(path, &st) != nil || syscall.Stat(filepath.Dir(path), &parent) != nil {
		return false
	}
	return st.Dev != parent.Dev
}
