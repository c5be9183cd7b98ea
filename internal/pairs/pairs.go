// Package pairs encodes and decodes proxy-wasm's serialized header maps, the
// format both sides of the ABI use: the host (host/) and the filter's ABI
// layer (filter/internal/abi). It uses the standard library only.
package pairs

import "errors"

// ErrMalformed reports a serialized map that does not parse.
var ErrMalformed = errors.New("malformed serialized header map")

// Encode serializes a header map: a u32 count, then a u32 key size and a u32
// value size per pair, then every key and value followed by a NUL byte; all
// integers little-endian. The empty map is a single count word of zero.
func Encode(h [][2]string) []byte {
	size := 4 + 8*len(h)
	for _, kv := range h {
		size += len(kv[0]) + len(kv[1]) + 2
	}
	b := make([]byte, 4+8*len(h), size)
	putU32(b, uint32(len(h)))
	for i, kv := range h {
		putU32(b[4+8*i:], uint32(len(kv[0])))
		putU32(b[8+8*i:], uint32(len(kv[1])))
	}
	for _, kv := range h {
		b = append(append(b, kv[0]...), 0)
		b = append(append(b, kv[1]...), 0)
	}
	return b
}

// Decode parses a serialized header map. An empty input or a single zero
// byte is the empty map (nil). It never reads out of bounds and reports a
// malformed map as ErrMalformed.
func Decode(b []byte) ([][2]string, error) {
	if len(b) == 0 || (len(b) == 1 && b[0] == 0) {
		return nil, nil
	}
	if len(b) < 4 {
		return nil, ErrMalformed
	}
	n := uint64(u32(b))
	if 4+8*n > uint64(len(b)) {
		return nil, ErrMalformed
	}
	out := make([][2]string, 0, n)
	data := b[4+8*n:]
	for i := uint64(0); i < n; i++ {
		ks := uint64(u32(b[4+8*i:]))
		vs := uint64(u32(b[8+8*i:]))
		if ks+vs+2 > uint64(len(data)) || data[ks] != 0 || data[ks+1+vs] != 0 {
			return nil, ErrMalformed
		}
		out = append(out, [2]string{string(data[:ks]), string(data[ks+1 : ks+1+vs])})
		data = data[ks+vs+2:]
	}
	if len(data) != 0 { // trailing bytes (cpp-host src/pairs_util.cc:198-200)
		return nil, ErrMalformed
	}
	return out, nil
}

// u32 and putU32 are binary.LittleEndian's, written out: encoding/binary
// brings reflect into every filter VM that imports this package (the
// floor: docs/WASM.md, "Memory at mesh scale").
func u32(b []byte) uint32 {
	_ = b[3]
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func putU32(b []byte, v uint32) {
	_ = b[3]
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}
