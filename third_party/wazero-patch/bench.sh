#!/bin/sh
# Runs the host tests against wazero v1.12.0 with termination.patch, then
# the filter benchmarks with stock and patched wazero side by side.
# BENCH (default FilterRequest) and BENCHTIME (default 20000x) select them.
set -eu
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go mod download github.com/tetratelabs/wazero@v1.12.0
src=$(go env GOMODCACHE)/github.com/tetratelabs/wazero@v1.12.0
cp -r "$src" "$tmp/wazero"
chmod -R u+w "$tmp/wazero"
patch -s -d "$tmp/wazero" -p1 <"$root/third_party/wazero-patch/termination.patch"
cp "$root/go.mod" "$root/go.sum" "$tmp/"
echo "replace github.com/tetratelabs/wazero => $tmp/wazero" >>"$tmp/go.mod"
cd "$root"
go test -count=1 -modfile="$tmp/go.mod" ./host/
go test -c -o "$tmp/stock.test" ./filter/
go test -c -modfile="$tmp/go.mod" -o "$tmp/patched.test" ./filter/
cd filter
for round in 1 2 3; do
	for t in stock patched; do
		echo "== wazero $t, round $round"
		"$tmp/$t.test" -test.run '^$' -test.bench "${BENCH:-FilterRequest}" -test.benchmem \
			-test.benchtime="${BENCHTIME:-20000x}" | grep '^Benchmark'
	done
done
