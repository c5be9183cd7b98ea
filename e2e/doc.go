// Package e2e holds loctree's end-to-end tests: the real agent (`loctree
// agent`, BPF programs attached to a private cgroup v2) and the real filter
// (`loctree wasm serve` running loctree.wasm in the wazero host, fetching the
// tree from the agent over HTTP) answer the same sources with endpoints of
// the candidate set that package shared computes, before and after a
// topology change. See docs/E2E.md; run with `go test ./e2e/ -v` as root.
//
// The load test (load_aware_test.go, over the harness in load_*_test.go)
// drives a service of three zones through a data plane with open-loop
// clients per zone and backends of bounded concurrency: load_aware against
// static locality and no locality, under overload and without
// (docs/PERFORMANCE.md, "Load-aware widening under overload").
package e2e
