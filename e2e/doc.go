// Package e2e holds loctree's end-to-end tests: the real agent (`loctree
// agent`, BPF programs attached to a private cgroup v2) and the real filter
// (`loctree wasm serve` running loctree.wasm in the wazero host, fetching the
// tree from the agent over HTTP) answer the same sources with endpoints of
// the candidate set that package shared computes, before and after a
// topology change. See docs/E2E.md; run with `go test ./e2e/ -v` as root.
package e2e
