package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/drainwatch/drainwatch/tools/docgen/docpage"
)

// cliPage is the CLI and flags reference; its generated block lists every
// command of commands with its flags.
var cliPage = filepath.Join("..", "..", "docs", "cli.md")

// cliReference renders the usage text and every command's flags, with the defaults a clean
// environment gives (flags default to environment variables: NODE_NAME,
// KUBECONFIG, DRAINWATCH_*, which the test unsets while it builds them).
func cliReference(t *testing.T) string {
	t.Helper()
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "NODE_NAME" || name == "KUBECONFIG" || strings.HasPrefix(name, "DRAINWATCH_") {
			value := os.Getenv(name)
			os.Unsetenv(name)
			t.Cleanup(func() { os.Setenv(name, value) })
		}
	}
	var b strings.Builder
	b.WriteString("```\n" + usage + "```\n")
	for _, c := range commands {
		if c.flags == nil {
			continue
		}
		b.WriteString("\n### drainwatch " + c.name + "\n\n")
		b.WriteString(docpage.FlagsTable(c.flags(io.Discard)))
	}
	return b.String()
}

// TestCLIReference fails when docs/cli.md's flag tables differ from the
// commands' flag sets; DRAINWATCH_WRITE_DOCS=1 (make docs) rewrites them.
func TestCLIReference(t *testing.T) {
	write := os.Getenv("DRAINWATCH_WRITE_DOCS") == "1"
	old, err := os.ReadFile(cliPage)
	if err != nil {
		t.Fatal(err)
	}
	page, err := docpage.Replace(string(old), "cli-flags", cliReference(t))
	if err != nil {
		t.Fatalf("%s: %v", cliPage, err)
	}
	if page == string(old) {
		return
	}
	if write {
		if err := os.WriteFile(cliPage, []byte(page), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s differs from the commands' flags: run `%s` and commit the result\n%s", cliPage, docpage.FixCommand, docpage.FirstDiff(string(old), page))
}

// TestCommandsListEveryCommand holds commands and the usage text together:
// a command the usage names but commands lacks would be missing from the
// CLI reference.
func TestCommandsListEveryCommand(t *testing.T) {
	listed := map[string]bool{}
	for _, c := range commands {
		listed[c.name] = true
		var out, errOut bytes.Buffer
		if code := dispatch([]string{c.name, "-h"}, &out, &errOut); c.flags != nil && code != 0 {
			t.Errorf("drainwatch %s -h exited %d: %s", c.name, code, errOut.String())
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^  drainwatch ([a-z]+)`).FindAllStringSubmatch(usage, -1) {
		if !listed[m[1]] {
			t.Errorf("the usage names drainwatch %s, which commands (commands.go) lacks", m[1])
		}
	}
}
