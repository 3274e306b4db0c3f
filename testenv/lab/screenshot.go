package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// ChromiumBin is Debian's chromium.
const ChromiumBin = "/usr/bin/chromium"

// Screenshot renders url in headless Chromium into the PNG file out, with
// the flags of the exporter's screenshot test (exporter/ui_test.go, which
// keeps its own copy inside a _test file): no sandbox (root), nothing
// fetched in the background, 1:1 pixels, sRGB.
func Screenshot(ctx context.Context, url, out string, width, height int) error {
	if _, err := os.Stat(ChromiumBin); err != nil {
		return fmt.Errorf("%s missing: install Debian's chromium (make deps): %w", ChromiumBin, err)
	}
	profile, err := os.MkdirTemp("", "drainwatch-lab-chromium-")
	if err != nil {
		return fmt.Errorf("chromium profile dir: %w", err)
	}
	defer os.RemoveAll(profile)
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(out), err)
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return fmt.Errorf("screenshot path %s: %w", out, err)
	}
	cmd := exec.CommandContext(ctx, ChromiumBin, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update",
		"--disable-sync", "--hide-scrollbars", "--force-device-scale-factor=1", "--force-color-profile=srgb",
		"--user-data-dir="+profile, "--screenshot="+abs, fmt.Sprintf("--window-size=%d,%d", width, height), url)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("chromium screenshot of %s: %w: %s", url, err, msg)
	}
	if _, err := os.Stat(abs); err != nil {
		return fmt.Errorf("chromium wrote no screenshot of %s: %w", url, err)
	}
	return nil
}

// pageHeight is a window height that shows n timelines of /ui whole.
func pageHeight(n int) int { return min(160+n*400, 8000) }
