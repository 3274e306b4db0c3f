package workload

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// ImageName is the short image name pods use to run the workload server.
const ImageName = "dwserver"

var built struct {
	sync.Mutex
	paths map[string]string
}

// Build compiles testenv/cmd/dwserver into dir (once per process and dir)
// and returns the binary's path. It runs `go build` from the module root, so
// the go tool must be on PATH; the build cache makes repeats fast.
func Build(ctx context.Context, dir string) (string, error) {
	built.Lock()
	defer built.Unlock()
	if p, ok := built.paths[dir]; ok {
		return p, nil
	}
	root, err := moduleRoot(ctx)
	if err != nil {
		return "", err
	}
	// Build next to the target and rename over it: a binary that pods of
	// another test process are running is replaced, never rewritten
	// (ETXTBSY), and they keep running the old inode.
	out := filepath.Join(dir, ImageName)
	tmp := fmt.Sprintf("%s.%d.tmp", out, os.Getpid())
	cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp, "./testenv/cmd/dwserver")
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building dwserver: %w: %s", err, msg)
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", fmt.Errorf("installing dwserver: %w", err)
	}
	if built.paths == nil {
		built.paths = map[string]string{}
	}
	built.paths[dir] = out
	return out, nil
}

func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/drainwatch/drainwatch").Output()
	if err != nil {
		return "", fmt.Errorf("finding the drainwatch module root (run from inside the repository): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}
