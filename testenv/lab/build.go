package lab

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"

	"github.com/drainwatch/drainwatch/testenv/controlplane"
)

// BuildDrainwatch builds cmd/drainwatch into dir (what `make build` puts in
// bin/) and returns the binary's path; the test uses it so it runs the
// current source.
func BuildDrainwatch(ctx context.Context, dir string) (string, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "drainwatch")
	// Plain flags, as go test compiles: the packages come from the build
	// cache the tests filled. -trimpath (make build's) would compile every
	// one of the product's ~700 packages again, minutes on a fresh machine
	// for a binary that behaves the same.
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/drainwatch")
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building drainwatch: %w: %s", err, msg)
	}
	return out, nil
}
