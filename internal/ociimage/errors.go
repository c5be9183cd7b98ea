package ociimage

import "errors"

// Sentinel errors.
var (
	// ErrBadAgentImage is wrapped by every error about an agent image that
	// is not what AgentIndex builds.
	ErrBadAgentImage = errors.New("not a loctree agent image")
	// ErrBadWasmImage means an image is not in the layout Istio accepts.
	ErrBadWasmImage = errors.New("not a wasm artifact image")
	// ErrNotWasm means the module does not start with the wasm magic and version.
	ErrNotWasm = errors.New("not a wasm module")
)
