package host

import (
	"strings"

	"github.com/loctree/loctree/internal/pairs"
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
	out := make(Headers, len(h), len(h)+2) // room for a header or two the plugin adds
	for i, kv := range h {
		out[i] = [2]string{strings.ToLower(kv[0]), kv[1]}
	}
	return out
}

// EncodePairs serializes a header map as the proxy-wasm ABI does
// (internal/pairs). An empty map encodes to an empty slice.
func EncodePairs(h Headers) []byte {
	if len(h) == 0 {
		return nil
	}
	return pairs.Encode(h)
}

// DecodePairs parses the ABI's serialized header map. An empty input or a
// single zero byte is the empty map. It never reads out of bounds and
// reports a malformed map as an error.
func DecodePairs(b []byte) (Headers, error) {
	h, err := pairs.Decode(b)
	return Headers(h), err
}

// toPairs is DecodePairs as cpp-host's PairsUtil::toPairs answers: a
// malformed map is the empty map (src/pairs_util.cc:122-200), so the
// hostcalls that take pairs go on without them.
func toPairs(b []byte) Headers {
	h, err := DecodePairs(b)
	if err != nil {
		return nil
	}
	return h
}
