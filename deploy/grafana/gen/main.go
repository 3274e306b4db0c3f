// Command gen writes drainwatch's Grafana dashboard as JSON (go generate in
// deploy/grafana; make generate).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/drainwatch/drainwatch/deploy/grafana"
)

func main() {
	out := flag.String("o", "drainwatch.json", "output file")
	flag.Parse()
	if err := write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func write(path string) error {
	data, err := grafana.JSON()
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
