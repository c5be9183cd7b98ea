package abi

import (
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/loctree/loctree/internal/pairs"
	pw "github.com/loctree/loctree/internal/proxywasm"
)

// EncodePairs serializes a header map in the ABI's format (internal/pairs).
// The empty map is a single count word of zero.
func EncodePairs(h [][2]string) []byte { return pairs.Encode(h) }

// DecodePairs parses a serialized header map, never reading out of bounds; a
// malformed map is types.ErrorStatusBadArgument.
func DecodePairs(b []byte) ([][2]string, error) {
	h, err := pairs.Decode(b)
	if err != nil {
		return nil, types.ErrorStatusBadArgument
	}
	return h, nil
}

// Status is a proxy_status_t (internal/proxywasm).
type Status pw.Status

// Err converts a status to the SDK's error values.
func (s Status) Err() error {
	switch pw.Status(s) {
	case pw.StatusOK:
		return nil
	case pw.StatusNotFound:
		return types.ErrorStatusNotFound
	case pw.StatusBadArgument:
		return types.ErrorStatusBadArgument
	case pw.StatusEmpty:
		return types.ErrorStatusEmpty
	case pw.StatusCASMismatch:
		return types.ErrorStatusCasMismatch
	case pw.StatusUnimplemented:
		return types.ErrorUnimplemented
	}
	return types.ErrorInternalFailure
}
