// Command supportmatrix turns the kernel matrix's MATRIX lines (printed by
// collector/kernel TestVMMatrix, collected with DRAINWATCH_MATRIX_OUT) into
// docs/support-matrix.md and the table between the markers of docs/support.md
// (Kernel and Kubernetes support):
//
//	DRAINWATCH_MATRIX_OUT=/tmp/matrix.txt make test   # or go test -run VMMatrix
//	go run ./tools/supportmatrix -in /tmp/matrix.txt
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	in := flag.String("in", "", "file of MATRIX lines (DRAINWATCH_MATRIX_OUT)")
	doc := flag.String("doc", "docs/support-matrix.md", "page to write")
	readme := flag.String("readme", "docs/support.md", "page whose table between the markers is replaced")
	flag.Parse()
	if err := run(*in, *doc, *readme); err != nil {
		fmt.Fprintln(os.Stderr, "supportmatrix:", err)
		os.Exit(1)
	}
}

func run(in, doc, readme string) error {
	data, err := os.ReadFile(in)
	if err != nil {
		return fmt.Errorf("reading the matrix run's output: %w", err)
	}
	m, err := parse(string(data))
	if err != nil {
		return err
	}
	table := m.table()
	if err := os.WriteFile(doc, []byte(page(table)), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", doc, err)
	}
	old, err := os.ReadFile(readme)
	if err != nil {
		return fmt.Errorf("reading %s: %w", readme, err)
	}
	updated, err := replaceBetweenMarkers(string(old), table)
	if err != nil {
		return fmt.Errorf("%s: %w", readme, err)
	}
	return os.WriteFile(readme, []byte(updated), 0o644)
}
