package workload

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// PythonPath is Debian's CPython.
const PythonPath = "/usr/bin/python3"

// PythonHTTP is CPython's http.server serving Dir, where /work is a file.
// It has no SIGTERM handler: the stop signal kills it at once, whatever it
// is serving (a real-world shape of "no graceful shutdown"). It has no slow
// route.
type PythonHTTP struct {
	Dir  string
	Addr string // "127.0.0.1:8080"
}

// Write writes /work's file into Dir and returns python3's argv.
func (p PythonHTTP) Write() ([]string, error) {
	host, port, err := net.SplitHostPort(p.Addr)
	if err != nil {
		return nil, fmt.Errorf("python http.server address %q: %w", p.Addr, err)
	}
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("python http.server dir: %w", err)
	}
	if err := os.WriteFile(filepath.Join(p.Dir, "work"), []byte("ok /work\n"), 0o644); err != nil {
		return nil, fmt.Errorf("python http.server /work: %w", err)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return []string{PythonPath, "-m", "http.server", "--bind", host, "--directory", p.Dir, port}, nil
}
