package chromium_test

import (
	"context"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/drainwatch/drainwatch/testenv/chromium"
	"github.com/drainwatch/drainwatch/testenv/privileged"
)

// TestScreenshot renders a page that is one colour and checks the PNG's
// size and a pixel in its middle.
func TestScreenshot(t *testing.T) {
	privileged.RequireRoot(t) // --no-sandbox is for root; CI runs as root
	privileged.RequireFile(t, chromium.Bin, "Debian's chromium (make deps)")
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `<!doctype html><body style="margin:0;background:#3366cc"></body>`)
	}))
	defer page.Close()
	out := filepath.Join(t.TempDir(), "sub", "page.png")
	if err := chromium.Screenshot(context.Background(), page.URL, out, 320, 200); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 320 || b.Dy() != 200 {
		t.Errorf("screenshot is %dx%d, want 320x200", b.Dx(), b.Dy())
	}
	r, g, b, _ := img.At(160, 100).RGBA()
	if got := fmt.Sprintf("#%02x%02x%02x", r>>8, g>>8, b>>8); got != "#3366cc" {
		t.Errorf("middle pixel %s, want #3366cc", got)
	}
}
