package loader

import "errors"

// Sentinel errors. Functions wrap them with context; test with errors.Is.
var (
	// ErrCapacity means a tree does not fit the maps' capacities. Nothing was
	// changed; raise the named --max-* flag (after `loctree agent uninstall`).
	ErrCapacity = errors.New("tree does not fit the BPF maps")
	// ErrPinned means maps pinned by an earlier agent cannot be re-adopted,
	// e.g. because they were created with other capacities.
	ErrPinned = errors.New("pinned BPF objects cannot be re-adopted")
	// ErrNoTree means no tree has been installed yet.
	ErrNoTree = errors.New("no tree installed yet")
)
