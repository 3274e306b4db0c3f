package lab

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Progress prints the lab's steps, one line each, with the wall-clock time
// and the time since the lab started, so a newcomer sees what runs and how
// long each part takes.
type Progress struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
}

// NewProgress prints to w; a nil w discards.
func NewProgress(w io.Writer) *Progress {
	if w == nil {
		w = io.Discard
	}
	return &Progress{w: w, start: time.Now()}
}

// Step prints one step line: "17:40:01.234 [+  12.3s] text".
func (p *Progress) Step(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	fmt.Fprintf(p.w, "%s [+%6.1fs] %s\n", now.Format("15:04:05.000"), now.Sub(p.start).Seconds(),
		fmt.Sprintf(format, args...))
}

// Block prints a multi-line block (a timeline, a table) as it is.
func (p *Progress) Block(text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprint(p.w, strings.TrimRight(text, "\n")+"\n")
}

// Elapsed is the time since the lab started.
func (p *Progress) Elapsed() time.Duration { return time.Since(p.start) }

// sideBySide puts left and right next to each other, left padded to width,
// under their titles.
func sideBySide(leftTitle, left, rightTitle, right string, width int) string {
	ls := append([]string{leftTitle}, strings.Split(strings.TrimRight(left, "\n"), "\n")...)
	rs := append([]string{rightTitle}, strings.Split(strings.TrimRight(right, "\n"), "\n")...)
	var b strings.Builder
	for i := range max(len(ls), len(rs)) {
		l, r := "", ""
		if i < len(ls) {
			l = ls[i]
		}
		if i < len(rs) {
			r = rs[i]
		}
		fmt.Fprintf(&b, "  %-*s | %s\n", width, l, r)
	}
	return b.String()
}
