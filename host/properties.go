package host

import (
	"encoding/binary"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/loctree/loctree/internal/pairs"
)

// Properties is a set of proxy-wasm properties, encoded as Envoy encodes
// them (source/extensions/common/wasm/context.cc, serializeValue): strings
// as their bytes, integers as 8 little-endian bytes, booleans as one byte,
// maps (such as xds.node.metadata.LABELS, a protobuf Struct that CEL sees as
// a map) as serialized pairs, the header-map encoding. A
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

// SetMap sets a string map: the path itself reads as the map's serialized
// pairs (keys sorted), and path+key reads as the string value.
func (p *Properties) SetMap(path []string, m map[string]string) {
	p.SetBytes(path, encodeMap(m))
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

// encodeMap serializes a map as Envoy serializes a CEL map: the pairs
// encoding of its entries, here in key order for determinism.
func encodeMap(m map[string]string) []byte {
	h := make([][2]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		h = append(h, [2]string{k, m[k]})
	}
	return pairs.Encode(h)
}
