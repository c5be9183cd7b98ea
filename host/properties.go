package host

import (
	"encoding/binary"
	"maps"
	"slices"
	"strings"
	"sync"
)

// Properties is a set of proxy-wasm properties, encoded as Envoy encodes
// them: strings as their bytes, integers as 8 little-endian bytes, booleans
// as one byte, string maps (protobuf Struct values such as
// xds.node.metadata.LABELS) as a serialized google.protobuf.Struct. A
// property path is a list of segments; on the wire the segments are joined
// by NUL bytes. Properties is safe for concurrent use.
type Properties struct {
	mu sync.RWMutex
	m  map[string][]byte
}

// NewProperties returns an empty property set.
func NewProperties() *Properties { return &Properties{m: map[string][]byte{}} }

// SplitPath splits a dotted property path ("xds.node.locality.region") into
// segments. A backslash escapes the next character, so a segment may hold a
// dot: `xds.node.metadata.LABELS.topology\.kubernetes\.io/zone`.
func SplitPath(path string) []string {
	var segs []string
	var cur strings.Builder
	for i := 0; i < len(path); i++ {
		switch c := path[i]; {
		case c == '\\' && i+1 < len(path):
			i++
			cur.WriteByte(path[i])
		case c == '.':
			segs = append(segs, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	return append(segs, cur.String())
}

func wireKey(segs []string) string { return strings.Join(segs, "\x00") }

// SetBytes sets the raw encoded value at path.
func (p *Properties) SetBytes(path []string, v []byte) {
	p.mu.Lock()
	p.m[wireKey(path)] = slices.Clone(v)
	p.mu.Unlock()
}

// SetString sets a string property.
func (p *Properties) SetString(path []string, v string) { p.SetBytes(path, []byte(v)) }

// SetInt sets an integer property (8 bytes, little-endian).
func (p *Properties) SetInt(path []string, v int64) {
	p.SetBytes(path, binary.LittleEndian.AppendUint64(nil, uint64(v)))
}

// SetBool sets a boolean property (one byte).
func (p *Properties) SetBool(path []string, v bool) {
	b := byte(0)
	if v {
		b = 1
	}
	p.SetBytes(path, []byte{b})
}

// SetMap sets a string map: the path itself reads as a serialized
// google.protobuf.Struct, and path+key reads as the string value.
func (p *Properties) SetMap(path []string, m map[string]string) {
	p.SetBytes(path, encodeStruct(m))
	for k, v := range m {
		p.SetString(append(slices.Clone(path), k), v)
	}
}

// Get returns the encoded value at the NUL-joined wire path.
func (p *Properties) Get(wirePath string) ([]byte, bool) {
	if p == nil {
		return nil, false
	}
	p.mu.RLock()
	v, ok := p.m[wirePath]
	p.mu.RUnlock()
	return v, ok
}

// Clone returns an independent copy.
func (p *Properties) Clone() *Properties {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return &Properties{m: maps.Clone(p.m)}
}

// encodeStruct serializes a google.protobuf.Struct whose values are all
// string_value, with keys sorted for determinism.
func encodeStruct(m map[string]string) []byte {
	var out []byte
	for _, k := range slices.Sorted(maps.Keys(m)) {
		value := appendField(nil, 3, []byte(m[k])) // Value.string_value = 3
		entry := appendField(appendField(nil, 1, []byte(k)), 2, value)
		out = appendField(out, 1, entry) // Struct.fields = 1 (map entry)
	}
	return out
}

// appendField appends a length-delimited protobuf field.
func appendField(b []byte, field int, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(field)<<3|2)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}
