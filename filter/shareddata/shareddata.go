// Package shareddata names the proxy-wasm shared-data keys the loctree
// filter keeps, common to every VM of a plugin in one proxy: the filter
// writes them, and a host-side reader (`loctree wasm serve`'s proxy,
// `loctree wasm run`, the demo) reads the tree under Tree. It has no
// dependencies and builds for GOOS=wasip1.
package shareddata

const (
	// Tree holds the encoded tree of the latest generation.
	Tree = "loctree/tree"
	// PreviousTree holds the tree Tree held before, which decoded in the
	// VM that published it: a VM that rejects Tree after releasing its own
	// tree installs it instead (one more blob per proxy).
	PreviousTree = "loctree/tree/previous"
	// Generation holds its version: the generation (8 bytes, little
	// endian), the tree's checksum (4) and its format version (2, little
	// endian), which a VM reads before the tree: a VM of another format
	// leaves the tree alone.
	Generation = "loctree/generation"
	// FetchLease holds which VM fetches the tree next: its owner (8 bytes)
	// and the lease's expiry (unix ns, 8 bytes).
	FetchLease = "loctree/fetch-lease"
)
