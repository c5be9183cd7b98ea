// Package loader is loctree's agent on a node (`loctree agent`): Run starts
// a source of endpoints (loader/source: a topology file or directory,
// Kubernetes), installs each of its updates into the kernel path through
// one update path — build the changed services, refuse a bad one alone (or
// the whole update, for a source whose updates are whole), install them
// with loader/kernel, publish the tree — and serves the tree (/v1/tree),
// metrics and health over HTTP. docs/AGENT.md explains the design and how
// to run it.
package loader
