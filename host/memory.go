package host

import "unsafe"

// read returns a view of size bytes of module memory at ptr. The view is
// valid until the module runs again; copy what must outlive the hostcall.
func (vm *VM) read(ptr, size uint64) ([]byte, bool) {
	if size == 0 {
		return nil, true
	}
	return vm.mem.Read(uint32(ptr), uint32(size))
}

func (vm *VM) readString(ptr, size uint64) (string, bool) {
	b, ok := vm.read(ptr, size)
	return string(b), ok
}

// view is readString without the copy: the string shares module memory, so
// it is valid only until the module runs again (an allocation through
// returnBytes included). Use it for lookups, never store it.
func (vm *VM) view(ptr, size uint64) (string, bool) {
	b, ok := vm.read(ptr, size)
	if len(b) == 0 {
		return "", ok
	}
	return unsafe.String(&b[0], len(b)), ok
}

// returnString is returnBytes of a string, without copying it first.
func (vm *VM) returnString(s string, retPtr, retSize uint64) Status {
	return vm.returnBytes(unsafe.Slice(unsafe.StringData(s), len(s)), retPtr, retSize)
}

func (vm *VM) writeU32(ptr uint64, v uint32) bool { return vm.mem.WriteUint32Le(uint32(ptr), v) }

func (vm *VM) writeU64(ptr uint64, v uint64) bool { return vm.mem.WriteUint64Le(uint32(ptr), v) }

// alloc asks the module's allocator for size bytes, with only the
// allocator's allow-list of host functions callable (cpp-host
// include/proxy-wasm/wasm.h:393-407, WasmBase::allocMemory).
func (vm *VM) alloc(size int) (uint32, bool) {
	st := vm.allocStack[:] // a field: a local would escape to the heap every call
	st[0] = uint64(size)
	prevAllowed, prevPhase := vm.allowed, vm.phase
	vm.allowed, vm.phase = allocAllowed, "the allocator"
	// The allocation runs inside the hostcall, under the hostcall's context.
	err := vm.fn.alloc.CallWithStack(vm.allocCtx, st)
	vm.allowed, vm.phase = prevAllowed, prevPhase
	if err != nil {
		panic(err) // a trap in the allocator fails the VM, as in cpp-host
	}
	p := uint32(st[0])
	return p, p != 0 || size == 0
}

// returnBytes copies data into a module-owned buffer and writes its address
// and size to retPtr and retSize, as the ABI's return_*_data arguments ask.
func (vm *VM) returnBytes(data []byte, retPtr, retSize uint64) Status {
	var p uint32
	if len(data) > 0 {
		var ok bool
		if p, ok = vm.alloc(len(data)); !ok {
			return StatusInvalidMemoryAccess // cpp-host WasmBase::copyToPointerSize fails
		}
		if !vm.mem.Write(p, data) {
			return StatusInvalidMemoryAccess
		}
	}
	if !vm.writeU32(retPtr, p) || !vm.writeU32(retSize, uint32(len(data))) {
		return StatusInvalidMemoryAccess
	}
	return StatusOK
}
