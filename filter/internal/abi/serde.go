package abi

import (
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/loctree/loctree/internal/pairs"
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

// Status is a proxy_status_t.
type Status uint32

// Err converts a status to the SDK's error values.
func (s Status) Err() error {
	switch s {
	case 0:
		return nil
	case 1:
		return types.ErrorStatusNotFound
	case 2:
		return types.ErrorStatusBadArgument
	case 7:
		return types.ErrorStatusEmpty
	case 8:
		return types.ErrorStatusCasMismatch
	case 12:
		return types.ErrorUnimplemented
	}
	return types.ErrorInternalFailure
}
