package host

import "strings"

// The property hostcalls (cpp-host src/exports.cc:64-90) and the
// properties the host answers itself.

func hcGetProperty(vm *VM, st []uint64) Status {
	p, ok := vm.view(st[0], st[1]) // used before the module runs again
	if !ok {
		return StatusInvalidMemoryAccess
	}
	v, found := vm.property(strings.TrimSuffix(p, "\x00"))
	if !found {
		return StatusNotFound
	}
	return vm.returnBytes(v, st[2], st[3])
}

// property looks a wire path up in the stream's properties, the host's, and
// the built-in ones (plugin_*, request.*).
func (vm *VM) property(path string) ([]byte, bool) {
	s := vm.streams[vm.effective]
	if s != nil {
		if v, ok := s.props.Get(path); ok {
			return v, true
		}
	}
	if v, ok := vm.h.props.Get(path); ok {
		return v, true
	}
	switch path {
	case "plugin_name":
		return []byte(vm.h.opts.PluginName), true
	case "plugin_root_id":
		return []byte(vm.h.opts.RootID), true
	case "plugin_vm_id":
		return []byte(vm.h.opts.VMID), true
	}
	if s != nil {
		return s.requestProperty(path)
	}
	return nil, false
}

// requestProperty answers Envoy's request.* attributes from the headers.
func (s *Stream) requestProperty(path string) ([]byte, bool) {
	var header string
	switch path {
	case "request\x00path":
		header = ":path"
	case "request\x00host":
		header = ":authority"
	case "request\x00method":
		header = ":method"
	case "request\x00scheme":
		header = ":scheme"
	case "request\x00id":
		header = "x-request-id"
	case "request\x00referer":
		header = "referer"
	case "request\x00useragent":
		header = "user-agent"
	case "request\x00url_path":
		p, _ := s.reqHeaders.Get(":path")
		p, _, _ = strings.Cut(p, "?")
		return []byte(p), true
	default:
		return nil, false
	}
	v, ok := s.reqHeaders.Get(header)
	return []byte(v), ok
}

func hcSetProperty(vm *VM, st []uint64) Status {
	p, ok1 := vm.readString(st[0], st[1])
	v, ok2 := vm.read(st[2], st[3])
	if !ok1 || !ok2 {
		return StatusInvalidMemoryAccess
	}
	s := vm.streams[vm.effective]
	if s == nil {
		return StatusNotFound
	}
	if s.props == nil {
		s.props = NewProperties()
	}
	s.props.SetBytes(strings.Split(strings.TrimSuffix(p, "\x00"), "\x00"), v)
	return StatusOK
}
