// Command othersdk is a proxy-wasm module with another SDK's export set
// (ABI 0.2.0 marker, malloc instead of proxy_on_memory_allocate, no
// _initialize-time work), used to test that the host runs modules not built
// with loctree's ABI layer. It logs every callback so tests can check order.
package main

import (
	"encoding/binary"
	"strconv"
	"unsafe"
)

func main() {}

//go:wasmimport env proxy_log
func proxyLog(level uint32, msg unsafe.Pointer, size uint32) uint32

//go:wasmimport env proxy_get_header_map_pairs
func proxyGetHeaderMapPairs(typ uint32, retData, retSize unsafe.Pointer) uint32

//go:wasmimport env proxy_set_header_map_pairs
func proxySetHeaderMapPairs(typ uint32, data unsafe.Pointer, size uint32) uint32

//go:wasmimport env proxy_get_property
func proxyGetProperty(path unsafe.Pointer, size uint32, retData, retSize unsafe.Pointer) uint32

//go:wasmimport env proxy_grpc_call
func proxyGrpcCall(a, b, c, d, e, f, g, h, i, j, timeout uint32, ret unsafe.Pointer) uint32

//go:wasmimport env proxy_set_shared_data
func proxySetSharedData(key unsafe.Pointer, keySize uint32, value unsafe.Pointer, valueSize uint32, cas uint32) uint32

//go:wasmimport env proxy_send_local_response
func proxySendLocalResponse(status uint32, d unsafe.Pointer, ds uint32, b unsafe.Pointer, bs uint32, h unsafe.Pointer, hs uint32, grpc int32) uint32

//go:wasmimport env proxy_set_effective_context
func proxySetEffectiveContext(id uint32) uint32

//go:wasmimport env proxy_done
func proxyDone() uint32

var keep [][]byte

// deferID is a stream whose proxy_on_done answered false; the next tick
// finishes it with proxy_done.
var deferID uint32

//go:wasmexport proxy_abi_version_0_2_0
func abiVersion() {}

//go:wasmexport malloc
func malloc(size uint32) uint32 {
	b := make([]byte, size+1)
	keep = append(keep, b)
	return uint32(uintptr(unsafe.Pointer(&b[0])))
}

func logf(parts ...string) {
	s := ""
	for _, p := range parts {
		s += p + " "
	}
	proxyLog(2, unsafe.Pointer(unsafe.StringData(s)), uint32(len(s)-1))
}

func u(x uint32) string { return strconv.FormatUint(uint64(x), 10) }

//go:wasmexport proxy_on_context_create
func onCreate(id, parent uint32) { logf("create", u(id), u(parent)) }

//go:wasmexport proxy_on_vm_start
func onVMStart(id, size uint32) uint32 { logf("vm_start", u(size)); return 1 }

//go:wasmexport proxy_on_configure
func onConfigure(id, size uint32) uint32 { logf("configure", u(size)); return 1 }

//go:wasmexport proxy_on_request_headers
func onRequestHeaders(id, n, eos uint32) uint32 {
	logf("request_headers", u(n), u(eos))
	var p, size uint32
	proxyGetHeaderMapPairs(0, unsafe.Pointer(&p), unsafe.Pointer(&size))
	pairs := decode(unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(nil), p)), size))
	keep = keep[:0]
	out := [][2]string{}
	for _, kv := range pairs {
		switch kv[0] {
		case "x-trap":
			var z []int
			_ = z[len(kv[1])] // index out of range: the module panics and exits
		case "x-loop":
			for {
			}
		case "x-defer":
			deferID = id
		case "x-deny":
			body := "denied"
			proxySendLocalResponse(403, nil, 0, unsafe.Pointer(unsafe.StringData(body)), uint32(len(body)), nil, 0, -1)
		}
		out = append(out, kv)
	}
	var call uint32
	out = append(out, [2]string{"x-grpc-status", u(proxyGrpcCall(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1000, unsafe.Pointer(&call)))})
	path := "plugin_root_id"
	proxyGetProperty(unsafe.Pointer(unsafe.StringData(path)), uint32(len(path)), unsafe.Pointer(&p), unsafe.Pointer(&size))
	out = append(out, [2]string{"x-root-id", string(unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(nil), p)), size))})
	key, val := "k", "v"
	st := proxySetSharedData(unsafe.Pointer(unsafe.StringData(key)), 1, unsafe.Pointer(unsafe.StringData(val)), 1, 12345)
	out = append(out, [2]string{"x-cas-status", u(st)})
	enc := encode(out)
	proxySetHeaderMapPairs(0, unsafe.Pointer(&enc[0]), uint32(len(enc)))
	return 0
}

//go:wasmexport proxy_on_log
func onLog(id uint32) { logf("log", u(id)) }

//go:wasmexport proxy_on_done
func onDone(id uint32) uint32 {
	logf("done", u(id))
	if id == deferID {
		return 0
	}
	return 1
}

//go:wasmexport proxy_on_tick
func onTick(root uint32) {
	if deferID != 0 {
		proxySetEffectiveContext(deferID)
		logf("proxy_done", u(proxyDone()))
		deferID = 0
	}
}

//go:wasmexport proxy_on_delete
func onDelete(id uint32) { logf("delete", u(id)) }

func decode(b []byte) [][2]string {
	if len(b) < 4 {
		return nil
	}
	n := int(binary.LittleEndian.Uint32(b))
	data := b[4+8*n:]
	var out [][2]string
	for i := range n {
		ks, vs := int(binary.LittleEndian.Uint32(b[4+8*i:])), int(binary.LittleEndian.Uint32(b[8+8*i:]))
		out = append(out, [2]string{string(data[:ks]), string(data[ks+1 : ks+1+vs])})
		data = data[ks+vs+2:]
	}
	return out
}

func encode(h [][2]string) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(h)))
	for _, kv := range h {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(kv[0])))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(kv[1])))
	}
	for _, kv := range h {
		b = append(append(b, kv[0]...), 0)
		b = append(append(b, kv[1]...), 0)
	}
	return b
}
