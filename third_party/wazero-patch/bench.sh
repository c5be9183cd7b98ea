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
# stock.mod: the module without any wazero replacement; patched.mod: with
# the copy patched here.
mkdir "$tmp/stock" "$tmp/patched"
grep -v '^replace github.com/tetratelabs/wazero ' "$root/go.mod" >"$tmp/stock/go.mod"
cp "$tmp/stock/go.mod" "$tmp/patched/go.mod"
echo "replace github.com/tetratelabs/wazero => $tmp/wazero" >>"$tmp/patched/go.mod"
cd "$root"
for t in stock patched; do
	cp go.sum "$tmp/$t/go.sum"
	go mod download -modfile="$tmp/$t/go.mod" github.com/tetratelabs/wazero@v1.12.0 2>/dev/null || true
done
go test -count=1 -modfile="$tmp/patched/go.mod" ./host/
for t in stock patched; do
	go test -c -modfile="$tmp/$t/go.mod" -o "$tmp/$t.test" ./filter/
done
cd filter
for round in 1 2 3; do
	for t in stock patched; do
		echo "== wazero $t, round $round"
		"$tmp/$t.test" -test.run '^$' -test.bench "${BENCH:-FilterRequest}" -test.benchmem \
			-test.benchtime="${BENCHTIME:-20000x}" | grep '^Benchmark'
	done
done
