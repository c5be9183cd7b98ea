package abi

import (
	"encoding/binary"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"
)

// EncodePairs serializes a header map in the ABI's format (count, sizes,
// NUL-terminated keys and values, little-endian). The empty map is a
// single count word of zero.
func EncodePairs(h [][2]string) []byte {
	size := 4 + 8*len(h)
	for _, kv := range h {
		size += len(kv[0]) + len(kv[1]) + 2
	}
	b := make([]byte, 4+8*len(h), size)
	binary.LittleEndian.PutUint32(b, uint32(len(h)))
	for i, kv := range h {
		binary.LittleEndian.PutUint32(b[4+8*i:], uint32(len(kv[0])))
		binary.LittleEndian.PutUint32(b[8+8*i:], uint32(len(kv[1])))
	}
	for _, kv := range h {
		b = append(append(b, kv[0]...), 0)
		b = append(append(b, kv[1]...), 0)
	}
	return b
}

// DecodePairs parses a serialized header map, never reading out of bounds.
func DecodePairs(b []byte) ([][2]string, error) {
	if len(b) == 0 || (len(b) == 1 && b[0] == 0) {
		return nil, nil
	}
	if len(b) < 4 {
		return nil, types.ErrorStatusBadArgument
	}
	n := uint64(binary.LittleEndian.Uint32(b))
	if 4+8*n > uint64(len(b)) {
		return nil, types.ErrorStatusBadArgument
	}
	out := make([][2]string, 0, n)
	data := b[4+8*n:]
	for i := uint64(0); i < n; i++ {
		ks := uint64(binary.LittleEndian.Uint32(b[4+8*i:]))
		vs := uint64(binary.LittleEndian.Uint32(b[8+8*i:]))
		if ks+vs+2 > uint64(len(data)) || data[ks] != 0 || data[ks+1+vs] != 0 {
			return nil, types.ErrorStatusBadArgument
		}
		out = append(out, [2]string{string(data[:ks]), string(data[ks+1 : ks+1+vs])})
		data = data[ks+vs+2:]
	}
	return out, nil
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
