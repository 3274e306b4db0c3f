// Command k8smatrix turns make k8s-versions' runs (one `go test -json`
// output per Kubernetes release, <dir>/<version>.json) into
// docs/kubernetes-matrix.txt (one K8SMATRIX line per test and release,
// committed: what the table was made from) and the table between the
// markers of docs/support.md's Kubernetes section:
//
//	make k8s-versions                       # runs the subset, then this
//	go run ./tools/k8smatrix -txt docs/kubernetes-matrix.txt   # the table again from the lines
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	in := flag.String("in", "", "directory of <version>.json files (go test -json); empty: read -txt")
	versions := flag.String("versions", "", "releases in column order (space-separated); with -in")
	txt := flag.String("txt", "docs/kubernetes-matrix.txt", "K8SMATRIX lines: written from -in, else read")
	doc := flag.String("doc", "docs/support.md", "page whose table between the markers is replaced")
	flag.Parse()
	if err := run(*in, strings.Fields(*versions), *txt, *doc); err != nil {
		fmt.Fprintln(os.Stderr, "k8smatrix:", err)
		os.Exit(1)
	}
}

func run(in string, versions []string, txt, doc string) error {
	var m *matrix
	if in != "" {
		if len(versions) == 0 {
			return fmt.Errorf("-in needs -versions")
		}
		m = &matrix{versions: versions, cells: map[[2]string]cell{}}
		for _, v := range versions {
			data, err := os.ReadFile(in + "/" + v + ".json")
			if err != nil {
				return fmt.Errorf("reading the run on %s: %w", v, err)
			}
			if err := m.addRun(v, data); err != nil {
				return fmt.Errorf("the run on %s: %w", v, err)
			}
		}
		if err := os.WriteFile(txt, []byte(m.lines()), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", txt, err)
		}
	} else {
		data, err := os.ReadFile(txt)
		if err != nil {
			return fmt.Errorf("reading %s: %w", txt, err)
		}
		if m, err = parseLines(string(data)); err != nil {
			return fmt.Errorf("%s: %w", txt, err)
		}
	}
	old, err := os.ReadFile(doc)
	if err != nil {
		return fmt.Errorf("reading %s: %w", doc, err)
	}
	updated, err := replaceBetweenMarkers(string(old), m.table())
	if err != nil {
		return fmt.Errorf("%s: %w", doc, err)
	}
	return os.WriteFile(doc, []byte(updated), 0o644)
}
