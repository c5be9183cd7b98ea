package host

import "strings"

// Header-map hostcalls as Envoy answers them (source/extensions/common/wasm/
// context.cc: Context::getMap, getConstMap and the *HeaderMap* methods;
// argument checks in cpp-host src/exports.cc:316-441). A stream's map is
// there while its callback runs and until the filter continues past it (a
// callback answering Continue drops it); in proxy_on_log the request and
// response headers and the response trailers can be read, not changed. A
// map that is not there is BadArgument, except that get_header_map_pairs
// answers Ok with no pairs.

// headerMap returns the map the ABI names, if it is there for reading
// (write false) or for changing (write true).
func (vm *VM) headerMap(t uint64, write bool) *Headers {
	s := vm.streams[vm.effective]
	switch {
	case t <= mapResponseTrailers:
		return s.streamMap(int(t), write, vm.logging)
	case (t == mapHTTPCallHeaders || t == mapHTTPCallTrailers) && vm.callResp != nil && !write:
		if t == mapHTTPCallHeaders {
			return &vm.callResp.headers
		}
		return &vm.callResp.trailers
	}
	return nil
}

// streamMap is map t of stream s (nil s: none).
func (s *Stream) streamMap(t int, write, logging bool) *Headers {
	if s == nil {
		return nil
	}
	maps := [...]*Headers{&s.reqHeaders, &s.reqTrailers, &s.respHeaders, &s.respTrailers}
	if s.live[t] || (logging && !write && t != mapRequestTrailers) {
		return maps[t]
	}
	return nil
}

func hcMapSize(vm *VM, st []uint64) Status {
	m := vm.headerMap(st[0], true) // Envoy's getHeaderMapSize uses the mutable map
	if m == nil {
		return StatusBadArgument
	}
	if !vm.writeU32(st[1], uint32(len(EncodePairs(*m)))) {
		return StatusInvalidMemoryAccess
	}
	return StatusOK
}

func hcGetPairs(vm *VM, st []uint64) Status {
	if st[0] > mapHTTPCallTrailers {
		return StatusBadArgument
	}
	var h Headers
	if m := vm.headerMap(st[0], false); m != nil {
		h = *m
	}
	return vm.returnBytes(EncodePairs(h), st[1], st[2])
}

func hcSetPairs(vm *VM, st []uint64) Status {
	b, ok := vm.read(st[1], st[2])
	if !ok {
		return StatusInvalidMemoryAccess
	}
	m := vm.headerMap(st[0], true)
	if m == nil {
		return StatusBadArgument
	}
	*m = toPairs(b).lowered() // malformed pairs empty the map (cpp-host src/exports.cc:423-424)
	return StatusOK
}

func hcGetValue(vm *VM, st []uint64) Status {
	k, ok := vm.view(st[1], st[2]) // a lookup key only: no copy
	if !ok {
		return StatusInvalidMemoryAccess
	}
	k = strings.ToLower(k) // allocates only for upper-case keys
	m := vm.headerMap(st[0], false)
	if m == nil && !(vm.logging && st[0] <= mapHTTPCallTrailers) {
		return StatusBadArgument
	}
	var v string
	ok = false // a map absent in proxy_on_log has no keys (NotFound)
	if m != nil {
		v, ok = m.Get(k)
	}
	if !ok && vm.h.abi != abi010 { // ABI 0.1.0 gets "" for a missing key
		return StatusNotFound
	}
	return vm.returnString(v, st[3], st[4])
}

// change applies f to the map st[0] names, if it may be changed now.
func (vm *VM) change(st []uint64, withValue bool, f func(m *Headers, k, v string)) Status {
	kb, ok := vm.read(st[1], st[2])
	var vb []byte
	if withValue {
		var okv bool
		vb, okv = vm.read(st[3], st[4])
		ok = ok && okv
	}
	if !ok {
		return StatusInvalidMemoryAccess
	}
	k, v := copyPair(kb, vb)
	m := vm.headerMap(st[0], true)
	if m == nil {
		return StatusBadArgument
	}
	f(m, k, v)
	return StatusOK
}

func hcAddValue(vm *VM, st []uint64) Status {
	return vm.change(st, true, func(m *Headers, k, v string) { m.Add(k, v) })
}

func hcReplaceValue(vm *VM, st []uint64) Status {
	return vm.change(st, true, func(m *Headers, k, v string) { m.Set(k, v) })
}

func hcRemoveValue(vm *VM, st []uint64) Status {
	return vm.change(st, false, func(m *Headers, k, _ string) { m.Del(k) })
}

// copyPair copies a header's key (lower-cased) and value out of module
// memory in one allocation.
func copyPair(k, v []byte) (string, string) {
	var b strings.Builder
	b.Grow(len(k) + len(v))
	b.Write(k)
	b.Write(v)
	s := b.String()
	return strings.ToLower(s[:len(k)]), s[len(k):]
}
