// Package shared is loctree's locality tree: the model of services, scopes and
// endpoints, the builder that turns them into one encoded tree, the zero-copy
// decoder, the per-request lookup and the in-group pickers.
//
// It uses the standard library only and builds for GOOS=wasip1, because the same
// code runs in the agent, in the proxy-wasm filter and in tests that check the
// kernel's answers. The byte layout is specified in docs/FORMAT.md.
//
// A lookup answers "which endpoints may a client in this locality use": the
// endpoints that share the longest prefix of the service's routing scopes with
// the source (failover), or only those that match every scope (strict). The
// answer is a contiguous range of the service's sorted endpoints, found in
// O(levels) hash probes (one per scope) without allocating.
package shared
