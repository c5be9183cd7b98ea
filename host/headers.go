package host

import (
	"encoding/binary"
	"errors"
	"strings"
)

// Headers is an ordered HTTP header map as Envoy keeps it: keys are lower
// case, a key may repeat, and pseudo-headers (":authority", ":path", ...) are
// ordinary entries.
type Headers [][2]string

// Get returns the first value of key (case-insensitive) and whether it exists.
func (h Headers) Get(key string) (string, bool) {
	key = strings.ToLower(key)
	for _, kv := range h {
		if kv[0] == key {
			return kv[1], true
		}
	}
	return "", false
}

// Values returns every value of key (case-insensitive), in order.
func (h Headers) Values(key string) []string {
	key = strings.ToLower(key)
	var out []string
	for _, kv := range h {
		if kv[0] == key {
			out = append(out, kv[1])
		}
	}
	return out
}

// Add appends key: value.
func (h *Headers) Add(key, value string) {
	*h = append(*h, [2]string{strings.ToLower(key), value})
}

// Set replaces every value of key with one value, keeping the position of
// the first occurrence (as Envoy's setCopy does); it adds key if missing.
func (h *Headers) Set(key, value string) {
	key = strings.ToLower(key)
	out := (*h)[:0]
	found := false
	for _, kv := range *h {
		if kv[0] != key {
			out = append(out, kv)
		} else if !found {
			found = true
			out = append(out, [2]string{key, value})
		}
	}
	if !found {
		out = append(out, [2]string{key, value})
	}
	*h = out
}

// Del removes every value of key.
func (h *Headers) Del(key string) {
	key = strings.ToLower(key)
	out := (*h)[:0]
	for _, kv := range *h {
		if kv[0] != key {
			out = append(out, kv)
		}
	}
	*h = out
}

// Clone returns a copy that shares no storage with h.
func (h Headers) Clone() Headers {
	if h == nil {
		return nil
	}
	return append(Headers(nil), h...)
}

// lowered returns a copy of h with lower-case keys.
func (h Headers) lowered() Headers {
	out := make(Headers, len(h))
	for i, kv := range h {
		out[i] = [2]string{strings.ToLower(kv[0]), kv[1]}
	}
	return out
}

// EncodePairs serializes a header map as the proxy-wasm ABI does: a u32
// count, then a u32 key size and a u32 value size per pair, then every key
// and value followed by a NUL byte. All integers are little-endian. An empty
// map encodes to an empty slice.
func EncodePairs(h Headers) []byte {
	if len(h) == 0 {
		return nil
	}
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
		b = append(b, kv[0]...)
		b = append(b, 0)
		b = append(b, kv[1]...)
		b = append(b, 0)
	}
	return b
}

var errPairs = errors.New("malformed serialized header map")

// DecodePairs parses the ABI's serialized header map. An empty input or a
// single zero byte is the empty map. It never reads out of bounds and
// reports a malformed map as an error.
func DecodePairs(b []byte) (Headers, error) {
	if len(b) == 0 || (len(b) == 1 && b[0] == 0) {
		return nil, nil
	}
	if len(b) < 4 {
		return nil, errPairs
	}
	n := uint64(binary.LittleEndian.Uint32(b))
	if 4+8*n > uint64(len(b)) {
		return nil, errPairs
	}
	out := make(Headers, 0, n)
	data := b[4+8*n:]
	for i := uint64(0); i < n; i++ {
		ks := uint64(binary.LittleEndian.Uint32(b[4+8*i:]))
		vs := uint64(binary.LittleEndian.Uint32(b[8+8*i:]))
		if ks+vs+2 > uint64(len(data)) || data[ks] != 0 || data[ks+1+vs] != 0 {
			return nil, errPairs
		}
		out = append(out, [2]string{string(data[:ks]), string(data[ks+1 : ks+1+vs])})
		data = data[ks+vs+2:]
	}
	return out, nil
}
