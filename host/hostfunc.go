package host

import (
	"github.com/tetratelabs/wazero/api"
)

// hostFunc is one function the host offers to modules, declared once: its
// import module and name, its parameters named as the spec names them, its
// results, its implementation, and the source its behaviour follows.
type hostFunc struct {
	module  string
	name    string
	params  []param
	results []api.ValueType
	call    func(vm *VM, st []uint64) // reads the arguments from st, writes the result to st[0]
	ref     string
}

type param struct {
	name string
	typ  api.ValueType
}

func i32(name string) param { return param{name, api.ValueTypeI32} }
func i64(name string) param { return param{name, api.ValueTypeI64} }

// qualified is "module.name", as cpp-host names host functions in its
// restricted-callback lists and its missing-import errors.
func (f *hostFunc) qualified() string { return f.module + "." + f.name }

func (f *hostFunc) paramTypes() []api.ValueType {
	ts := make([]api.ValueType, len(f.params))
	for i, p := range f.params {
		ts[i] = p.typ
	}
	return ts
}

func (f *hostFunc) paramNames() []string {
	ns := make([]string, len(f.params))
	for i, p := range f.params {
		ns[i] = p.name
	}
	return ns
}

// proxy declares an "env" proxy-wasm hostcall returning a proxy_status_t.
func proxy(name string, fn func(vm *VM, st []uint64) Status, ref string, params ...param) hostFunc {
	return hostFunc{module: "env", name: name, params: params, results: []api.ValueType{api.ValueTypeI32},
		call: func(vm *VM, st []uint64) { st[0] = uint64(fn(vm, st)) }, ref: ref}
}

func unimplemented(name, ref string, params ...param) hostFunc {
	return proxy(name, func(*VM, []uint64) Status { return StatusUnimplemented }, ref, params...)
}
