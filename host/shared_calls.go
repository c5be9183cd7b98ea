package host

// The shared-data and shared-queue hostcalls (cpp-host src/exports.cc:226-314).

func hcSetShared(vm *VM, st []uint64) Status {
	k, ok1 := vm.readString(st[0], st[1])
	v, ok2 := vm.read(st[2], st[3])
	if !ok1 || !ok2 {
		return StatusInvalidMemoryAccess
	}
	return vm.h.shared.Set(k, v, uint32(st[4]))
}

func hcGetShared(vm *VM, st []uint64) Status {
	k, ok := vm.readString(st[0], st[1])
	if !ok {
		return StatusInvalidMemoryAccess
	}
	v, cas, found := vm.h.shared.Get(k)
	if !found {
		return StatusNotFound
	}
	if s := vm.returnBytes(v, st[2], st[3]); s != StatusOK {
		return s
	}
	if !vm.writeU32(st[4], cas) {
		return StatusInvalidMemoryAccess
	}
	return StatusOK
}

func hcRegisterQueue(vm *VM, st []uint64) Status {
	name, ok := vm.readString(st[0], st[1])
	if !ok {
		return StatusInvalidMemoryAccess
	}
	id := vm.h.queues.register(name, vm, vm.rootID)
	if !vm.writeU32(st[2], id) {
		return StatusInvalidMemoryAccess
	}
	return StatusOK
}

func hcResolveQueue(vm *VM, st []uint64) Status {
	name, ok := vm.readString(st[2], st[3])
	if !ok {
		return StatusInvalidMemoryAccess
	}
	id, found := vm.h.queues.resolve(name)
	if !found {
		return StatusNotFound
	}
	if !vm.writeU32(st[4], id) {
		return StatusInvalidMemoryAccess
	}
	return StatusOK
}

func hcEnqueue(vm *VM, st []uint64) Status {
	v, ok := vm.read(st[1], st[2])
	if !ok {
		return StatusInvalidMemoryAccess
	}
	owner, ctxID, status := vm.h.queues.enqueue(uint32(st[0]), v)
	if status == StatusOK && owner != nil {
		go owner.queueReady(ctxID, uint32(st[0]))
	}
	return status
}

// queueReady delivers proxy_on_queue_ready.
func (vm *VM) queueReady(ctxID, queueID uint32) {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	if vm.broken != nil {
		return
	}
	ctx := vm.runCtx
	vm.effective = ctxID
	vm.call(ctx, vm.fn.queueReady, uint64(ctxID), uint64(queueID))
	vm.afterCall()
}

func hcDequeue(vm *VM, st []uint64) Status {
	v, status := vm.h.queues.dequeue(uint32(st[0]))
	if status != StatusOK {
		return status
	}
	return vm.returnBytes(v, st[1], st[2])
}
