package workload

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// ShellPath is the shell that becomes PID 1 in ignore-term mode.
const ShellPath = "/bin/sh"

// ShellCommand is the argv ignore-term mode execs: the shell runs the
// server (innerArgs, the mode already replaced by naive) in the background
// and waits for it, so the shell, not the server, is PID 1 and receives the
// stop signal.
func ShellCommand(self string, innerArgs []string) []string {
	quoted := make([]string, 0, len(innerArgs)+1)
	for _, a := range append([]string{self}, innerArgs...) {
		quoted = append(quoted, shellQuote(a))
	}
	return []string{ShellPath, "-c", strings.Join(quoted, " ") + " & wait"}
}

// ExecUnderShell replaces the current process with ShellCommand. It returns
// only on error.
func ExecUnderShell(innerArgs []string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding own executable: %w", err)
	}
	argv := ShellCommand(self, innerArgs)
	if err := syscall.Exec(argv[0], argv, os.Environ()); err != nil {
		return fmt.Errorf("exec %s: %w", argv[0], err)
	}
	return nil
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
