#!/bin/sh
# Rebuilds peer.wasm from assembly/index.ts with the pinned AssemblyScript
# toolchain from the npm registry (go generate ./host/ runs it). The module
# is committed, so the tests need neither node nor npm.
set -eu
cd "$(dirname "$0")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r package.json assembly "$work"/
(cd "$work" && npm install --no-audit --no-fund --silent && npm run --silent build)
cp "$work"/peer.wasm peer.wasm
