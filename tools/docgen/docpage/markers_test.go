package docpage

import (
	"strings"
	"testing"
)

func TestReplace(t *testing.T) {
	page := "# Page\n\n" + Block("x") + "\nafter\n"
	got, err := Replace(page, "x", "| a |\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "# Page\n\n" + begin("x") + "\n| a |\n" + end("x") + "\n\nafter\n"
	if got != want {
		t.Errorf("Replace:\n%s\nwant:\n%s", got, want)
	}
	if again, _ := Replace(got, "x", "| a |"); again != got {
		t.Errorf("Replace is not idempotent:\n%s", again)
	}
	if _, err := Replace(page, "y", ""); err == nil || !strings.Contains(err.Error(), "generated:y begin") {
		t.Errorf("a missing block: err = %v, want one naming its markers", err)
	}
}

func TestCell(t *testing.T) {
	if got, want := Cell("a|b\n/proc/<pid>"), `a\|b /proc/&lt;pid&gt;`; got != want {
		t.Errorf("Cell = %q, want %q", got, want)
	}
	if got := Code(""); got != "" {
		t.Errorf("Code(\"\") = %q, want empty", got)
	}
}
