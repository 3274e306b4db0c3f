#!/usr/bin/env bash
# Build the Go vulnerability database that `make vulncheck` hands govulncheck
# with -db file://, once per golang.org/x/vulndb version, into the directory
# given. The entries are the OSV files of the golang.org/x/vulndb module pinned
# in testenv/vulndb (its data/osv, from the Go module proxy like any module);
# vulndb's own cmd/indexdb, built by build-gotool.sh, writes the index/ and
# ID/ layout govulncheck reads, so nothing here needs the network beyond the
# module proxy. Concurrent runs wait for each other (flock).
#
#   build-vulndb.sh <module dir> <vulndb version> <indexdb binary> <output dir>
set -euo pipefail
moddir=$1 want=$2 indexdb=$3 out=$4
mkdir -p "$(dirname "$out")"
exec 9>"$out.lock"
flock 9
# The database is rebuilt when the indexer or the module's pins change.
stamp=$(cat "$indexdb.stamp")
if [ -f "$out/index/db.json" ] && [ "$(cat "$out.stamp" 2>/dev/null)" = "$stamp" ]; then exit 0; fi
cd "$moddir"
go mod download golang.org/x/vulndb
read -r have dir < <(go list -m -f '{{.Version}} {{.Dir}}' golang.org/x/vulndb)
if [ "$have" != "$want" ]; then
  echo "$moddir/go.mod pins golang.org/x/vulndb $have, the Makefile's VULNDB_VERSION is $want: make them agree" >&2
  exit 1
fi
echo ">> building the vulnerability database from golang.org/x/vulndb@$have (first time only)..."
start=$(date +%s)
rm -rf "$out.tmp"
"$indexdb" -vulns "$dir/data/osv" -out "$out.tmp"
rm -rf "$out"
mv "$out.tmp" "$out"
echo "$stamp" > "$out.stamp"
echo "   $(ls "$out/ID" | grep -c '\.json$') entries in $(( $(date +%s) - start ))s"
