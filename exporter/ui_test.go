package exporter

import (
	"context"
	"fmt"
	"html"
	"image"
	"image/png"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/testenv/chromium"
	"github.com/drainwatch/drainwatch/testenv/privileged"
)

func TestTimelinePageHTML(t *testing.T) {
	ts := testServer(t, nil)
	code, raw := get(t, ts.URL+"/ui?pod=web-6d4f-a")
	if code != 200 {
		t.Fatalf("status %d: %s", code, raw)
	}
	body := html.UnescapeString(raw)
	for _, want := range []string{"shop/web-6d4f-a — refused", "refused after SIGTERM: 44",
		"stop_signal +0.000s", "listener_closed +0.125s", `href="api/v1/terminations/uid-a"`, "fix: set preStop sleep ≥ 2 s: routing took 1.0 s"} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, banned := range []string{"<script", "http://", "https://"} {
		if strings.Contains(body, banned) {
			t.Errorf("page contains %q: it must be self-contained", banned)
		}
	}
}

// TestTimelineScreenshot renders /ui in headless Chromium and checks that
// each mark's colour is painted at the x position the layout computed, and
// nowhere else; the client attempts (bars) and the kubelet's probes (dots
// of their own colours) likewise, each colour also in its legend swatch.
func TestTimelineScreenshot(t *testing.T) {
	privileged.RequireRoot(t) // Chromium needs --no-sandbox as root; CI runs as root
	privileged.RequireFile(t, chromium.Bin, "Debian's chromium (testenv/scripts/install-deps.sh)")
	for name, term := range map[string]correlate.Termination{"naive": naiveTermination(), "probed": probedTermination()} {
		t.Run(name, func(t *testing.T) { checkScreenshot(t, term) })
	}
}

func checkScreenshot(t *testing.T, term correlate.Termination) {
	srv := NewServer(ServerConfig{Source: fakeSource{term}, Log: zerolog.Nop()})
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.Listener.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts.Listener = l
	ts.Start()
	defer ts.Close()

	img := screenshot(t, ts.URL+"/ui", 1000, 460)
	columns := colourColumns(img)
	scale := newTimeScale(term)
	for _, m := range term.Marks.Observed() {
		assertColumns(t, m.Name, columns[MarkColors[m.Name]], []float64{scale.X(m.Time)})
	}
	// The legend's swatches: client bars at legendX and legendX+6, probe
	// dots centred at legendX+4 and legendX+16.
	want := map[string][]float64{AcceptedColor: {legendX + 1}, RefusedColor: {legendX + 7},
		ProbeAcceptedColor: {legendX + 4}, ProbeRefusedColor: {legendX + 16}}
	for _, c := range term.Connections {
		colour, x := AcceptedColor, scale.X(c.Time)+1
		switch {
		case c.Probe && c.Refused:
			colour, x = ProbeRefusedColor, scale.X(c.Time)
		case c.Probe:
			colour, x = ProbeAcceptedColor, scale.X(c.Time)
		case c.Refused:
			colour = RefusedColor
		}
		want[colour] = append(want[colour], x)
	}
	for _, colour := range []string{AcceptedColor, RefusedColor, ProbeAcceptedColor, ProbeRefusedColor} {
		assertColumns(t, colour, columns[colour], want[colour])
	}
}

// assertColumns checks that colour was painted within 4 px of every
// expected x (a probe dot's radius) and nowhere else.
func assertColumns(t *testing.T, what string, got map[int]bool, want []float64) {
	t.Helper()
	near := func(x int) bool {
		for _, w := range want {
			if d := float64(x) - w; d >= -4 && d <= 4 {
				return true
			}
		}
		return false
	}
	for _, w := range want {
		found := false
		for x := int(w) - 3; x <= int(w)+3; x++ {
			found = found || got[x]
		}
		if !found {
			t.Errorf("%s: no pixel of its colour near x=%.1f (columns with it: %v)", what, w, keys(got))
		}
	}
	for x := range got {
		if !near(x) {
			t.Errorf("%s: its colour painted at x=%d, far from %v", what, x, want)
		}
	}
}

func keys(m map[int]bool) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	return out
}

// colourColumns maps "#rrggbb" to the set of x columns where it appears.
func colourColumns(img image.Image) map[string]map[int]bool {
	out := map[string]map[int]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			c := fmt.Sprintf("#%02x%02x%02x", r>>8, g>>8, bl>>8)
			if out[c] == nil {
				out[c] = map[int]bool{}
			}
			out[c][x] = true
		}
	}
	return out
}

// screenshot renders url with testenv/chromium and decodes its PNG. Set
// DRAINWATCH_UI_SCREENSHOT=path to keep a copy for a person to look at.
func screenshot(t *testing.T, url string, w, h int) image.Image {
	t.Helper()
	file := filepath.Join(t.TempDir(), "ui.png")
	if err := chromium.Screenshot(context.Background(), url, file, w, h); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("decoding the screenshot: %v", err)
	}
	if keep := os.Getenv("DRAINWATCH_UI_SCREENSHOT"); keep != "" {
		data, _ := os.ReadFile(file)
		_ = os.WriteFile(keep, data, 0o644)
	}
	return img
}
