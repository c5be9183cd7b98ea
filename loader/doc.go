// Package loader is loctree's agent on a node: it installs encoded trees
// into the kernel path's BPF maps (Installer: per-service atomic updates,
// only changed services rewritten, capacities checked before any change),
// attaches and pins the programs of package bpf to a cgroup v2 and
// re-adopts them after a restart, and serves the tree (/v1/tree), metrics
// and health over HTTP. Run is `loctree agent`; docs/AGENT.md explains the
// design and how to run it.
package loader
