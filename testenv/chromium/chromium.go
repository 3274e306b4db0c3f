// Package chromium takes screenshots of web pages with Debian's headless
// Chromium, for the exporter's /ui test (which checks pixels) and for the
// lab's results directory (which a person looks at).
package chromium

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Bin is Debian's chromium.
const Bin = "/usr/bin/chromium"

// Screenshot renders url in a width×height window into the PNG file out
// (its directory is created). The flags make the picture reproducible and
// the run quiet: no sandbox (tests and the lab run as root), no GPU, nothing
// fetched in the background, /tmp instead of a small container /dev/shm,
// no scrollbars, 1:1 pixels, sRGB; a throwaway profile each time.
func Screenshot(ctx context.Context, url, out string, width, height int) error {
	if _, err := os.Stat(Bin); err != nil {
		return fmt.Errorf("%s missing: install Debian's chromium (make deps): %w", Bin, err)
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return fmt.Errorf("screenshot path %s: %w", out, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(abs), err)
	}
	profile, err := os.MkdirTemp("", "drainwatch-chromium-")
	if err != nil {
		return fmt.Errorf("chromium profile dir: %w", err)
	}
	defer os.RemoveAll(profile)
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, Bin, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update",
		"--disable-sync", "--disable-dev-shm-usage", "--hide-scrollbars", "--force-device-scale-factor=1",
		"--force-color-profile=srgb", "--user-data-dir="+profile, "--screenshot="+abs,
		fmt.Sprintf("--window-size=%d,%d", width, height), url)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("chromium screenshot of %s: %w: %s", url, err, msg)
	}
	if _, err := os.Stat(abs); err != nil {
		return fmt.Errorf("chromium wrote no screenshot of %s: %w", url, err)
	}
	return nil
}
