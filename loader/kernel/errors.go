package kernel

import "errors"

// Sentinel errors. Functions wrap them with context; test with errors.Is.
var (
	// ErrCapacity means a tree does not fit the maps' capacities. Nothing was
	// changed; raise the named --max-* flag.
	ErrCapacity = errors.New("tree does not fit the BPF maps")
	// ErrPinned means maps or links pinned by an earlier agent cannot be
	// re-adopted: maps created with other capacities or another layout
	// (without Config.Replace), or links attached to another cgroup.
	ErrPinned = errors.New("pinned BPF objects cannot be re-adopted")
	// ErrOtherAgent means another agent's programs are attached to the
	// cgroup: one agent per cgroup.
	ErrOtherAgent = errors.New("another loctree agent serves this cgroup")
	// ErrNoTree means no tree has been installed yet.
	ErrNoTree = errors.New("no tree installed yet")
	// ErrNotInKernel marks a service the kernel does not install: it uses
	// a setting of the tree the BPF programs do not implement yet
	// (Refusal says which).
	ErrNotInKernel = errors.New("not implemented in the kernel yet")
)
