// Command docgen writes the generated blocks of the documentation pages
// from the code: the metrics reference (docs/metrics.md) from the
// collectors the daemon registers, and the chart's values table
// (docs/install.md) from deploy/helm/drainwatch/values.yaml. `make docs`
// runs it (and cmd/drainwatch's TestCLIReference with
// DRAINWATCH_WRITE_DOCS=1 for the flags in docs/cli.md); `make test` fails
// when a page differs from what it would write.
//
//	go run ./tools/docgen [-root DIR] [-check]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/drainwatch/drainwatch/tools/docgen/docpage"
)

// block is one generated block of a page.
type block struct {
	page, name string
	render     func(root string) (string, error)
}

var blocks = []block{
	{page: "docs/metrics.md", name: "metrics", render: func(string) (string, error) { return metricsTable() }},
	{page: "docs/install.md", name: "chart-values", render: valuesTable},
}

// rewrite returns each page's current and generated content.
func rewrite(root string) (map[string][2]string, error) {
	pages := map[string][2]string{}
	for _, b := range blocks {
		path := filepath.Join(root, b.page)
		cur, ok := pages[path]
		if !ok {
			data, err := os.ReadFile(path)
			if err != nil {
				return nil, err
			}
			cur = [2]string{string(data), string(data)}
		}
		body, err := b.render(root)
		if err != nil {
			return nil, fmt.Errorf("%s, block %s: %w", b.page, b.name, err)
		}
		if cur[1], err = docpage.Replace(cur[1], b.name, body); err != nil {
			return nil, fmt.Errorf("%s: %w", b.page, err)
		}
		pages[path] = cur
	}
	return pages, nil
}

func main() {
	root := flag.String("root", ".", "the repository's root")
	check := flag.Bool("check", false, "write nothing; exit 1 when a page differs from what the code generates")
	flag.Parse()
	pages, err := rewrite(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "docgen:", err)
		os.Exit(1)
	}
	code := 0
	for path, p := range pages {
		switch {
		case p[0] == p[1]:
		case *check:
			fmt.Fprintf(os.Stderr, "docgen: %s differs from what the code generates: run `%s` and commit the result\n", path, docpage.FixCommand)
			code = 1
		default:
			if err := os.WriteFile(path, []byte(p[1]), 0o644); err != nil {
				fmt.Fprintln(os.Stderr, "docgen:", err)
				os.Exit(1)
			}
			fmt.Println("wrote", path)
		}
	}
	os.Exit(code)
}
