// Package gobuild builds a main package of this module once per process:
// the test binaries (the workload server, the kubelet prober) that pods and
// node-local processes run.
package gobuild

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

var built struct {
	sync.Mutex
	paths map[string]string // dir/name → built (the key is the path)
}

// Main compiles the module's main package pkg ("./testenv/cmd/dwserver")
// into dir/name, once per process and path, and returns the path. It runs
// `go build` from the module root, so the go tool must be on PATH; the
// build cache makes repeats fast.
func Main(ctx context.Context, pkg, dir, name string) (string, error) {
	return build(ctx, pkg, dir, name)
}

// Static is Main with cgo off: a binary that needs no libc, for an image
// whose root holds nothing else (testenv/realnode's pause and workloads).
// Use another dir or name than Main's for the same package.
func Static(ctx context.Context, pkg, dir, name string) (string, error) {
	return build(ctx, pkg, dir, name, "CGO_ENABLED=0")
}

func build(ctx context.Context, pkg, dir, name string, env ...string) (string, error) {
	out := filepath.Join(dir, name)
	built.Lock()
	defer built.Unlock()
	if p, ok := built.paths[out]; ok {
		return p, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("%s dir: %w", name, err)
	}
	root, err := ModuleRoot(ctx)
	if err != nil {
		return "", err
	}
	// Build next to the target and rename over it: a binary that pods of
	// another test process are running is replaced, never rewritten
	// (ETXTBSY), and they keep running the old inode.
	tmp := fmt.Sprintf("%s.%d.tmp", out, os.Getpid())
	cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp, pkg)
	cmd.Dir = root
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %w: %s", pkg, err, msg)
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", fmt.Errorf("installing %s: %w", name, err)
	}
	if built.paths == nil {
		built.paths = map[string]string{}
	}
	built.paths[out] = out
	return out, nil
}

// ModuleRoot is the drainwatch module's directory.
func ModuleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/drainwatch/drainwatch").Output()
	if err != nil {
		return "", fmt.Errorf("finding the drainwatch module root (run from inside the repository): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}
