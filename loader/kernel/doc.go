// Package kernel installs loctree trees into the kernel: it loads the BPF
// programs of package bpf, creates or re-adopts their pinned maps, turns
// each service of a tree into the records and child tables the programs
// walk (written one service at a time, atomically, into regions reused only
// after an RCU grace period), attaches the programs to a cgroup v2
// directory and removes them again (Uninstall).
//
// The API is small: Open, then Installer.ApplyServices for each new tree
// (only the changed services are written), Attach once, Close. The agent
// (package loader) is its user; so are the kernel tests.
package kernel
