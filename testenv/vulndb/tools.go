//go:build tools

// Package vulndb pins the two things `make vulncheck` needs, both built by
// testenv/scripts/build-gotool.sh into .cache/: govulncheck
// (golang.org/x/vuln) and the Go vulnerability database's OSV entries with
// the indexer that turns them into a database govulncheck reads with
// -db file:// (golang.org/x/vulndb's data/osv and cmd/indexdb). A module of
// its own, so the project's go.mod does not grow their dependencies, and so
// the database is a module version the proxy serves: no network beyond it.
package vulndb

import (
	_ "golang.org/x/vuln/cmd/govulncheck"
	_ "golang.org/x/vulndb/cmd/indexdb"
)
