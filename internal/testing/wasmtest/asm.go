package wasmtest

import "slices"

// Value types of hand-assembled modules.
const (
	I32 byte = 0x7f
	I64 byte = 0x7e
)

// Import is a function a hand-assembled module imports.
type Import struct {
	Module, Name    string
	Params, Results []byte
}

// Func is a function a hand-assembled module defines. Body is its
// instructions without the final `end`; Export, if set, exports it.
type Func struct {
	Export          string
	Params, Results []byte
	Locals          []byte
	Body            []byte
}

// Module is a small wasm module assembled by hand for conformance tests:
// no SDK, no toolchain, only the imports and exports a test names. Function
// indices count the imports first, then Funcs.
type Module struct {
	Imports []Import
	Funcs   []Func
	// Pages is the size of the exported memory "memory" (0: none).
	Pages int
	// Data is copied into memory at DataAt.
	Data   []byte
	DataAt uint32
}

// Bytes encodes the module.
func (m *Module) Bytes() []byte {
	out := []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}
	out = append(out, section(1, m.typeSection())...)
	out = append(out, section(2, m.importSection())...)
	out = append(out, section(3, m.funcSection())...)
	if m.Pages > 0 {
		out = append(out, section(5, vector([][]byte{append([]byte{0x00}, uleb(uint64(m.Pages))...)}))...)
	}
	out = append(out, section(7, m.exportSection())...)
	out = append(out, section(10, m.codeSection())...)
	if len(m.Data) > 0 {
		seg := append(append([]byte{0x00, 0x41}, sleb(int64(m.DataAt))...), 0x0b)
		seg = append(append(seg, uleb(uint64(len(m.Data)))...), m.Data...)
		out = append(out, section(11, vector([][]byte{seg}))...)
	}
	return out
}

// Call is the instruction `call idx`.
func Call(idx int) []byte { return append([]byte{0x10}, uleb(uint64(idx))...) }

// I32Const is the instruction `i32.const v`.
func I32Const(v int32) []byte { return append([]byte{0x41}, sleb(int64(v))...) }

// I64Const is the instruction `i64.const v`.
func I64Const(v int64) []byte { return append([]byte{0x42}, sleb(v)...) }

// I32Load is `i32.load` of the address on the stack (alignment 2, offset 0).
func I32Load() []byte { return []byte{0x28, 0x02, 0x00} }

// Code concatenates instructions.
func Code(parts ...[]byte) []byte { return slices.Concat(parts...) }

func (m *Module) types() [][]byte {
	var ts [][]byte
	for _, im := range m.Imports {
		ts = append(ts, funcType(im.Params, im.Results))
	}
	for _, f := range m.Funcs {
		ts = append(ts, funcType(f.Params, f.Results))
	}
	return ts
}

func (m *Module) typeSection() []byte { return vector(m.types()) }

func (m *Module) importSection() []byte {
	var items [][]byte
	for i, im := range m.Imports {
		items = append(items, slices.Concat(name(im.Module), name(im.Name), []byte{0x00}, uleb(uint64(i))))
	}
	return vector(items)
}

func (m *Module) funcSection() []byte {
	var items [][]byte
	for i := range m.Funcs {
		items = append(items, uleb(uint64(len(m.Imports)+i)))
	}
	return vector(items)
}

func (m *Module) exportSection() []byte {
	var items [][]byte
	if m.Pages > 0 {
		items = append(items, append(name("memory"), 0x02, 0x00))
	}
	for i, f := range m.Funcs {
		if f.Export != "" {
			items = append(items, slices.Concat(name(f.Export), []byte{0x00}, uleb(uint64(len(m.Imports)+i))))
		}
	}
	return vector(items)
}

func (m *Module) codeSection() []byte {
	var items [][]byte
	for _, f := range m.Funcs {
		var locals [][]byte
		for _, l := range f.Locals {
			locals = append(locals, []byte{0x01, l})
		}
		body := slices.Concat(vector(locals), f.Body, []byte{0x0b})
		items = append(items, append(uleb(uint64(len(body))), body...))
	}
	return vector(items)
}

func funcType(params, results []byte) []byte {
	return slices.Concat([]byte{0x60}, uleb(uint64(len(params))), params, uleb(uint64(len(results))), results)
}

func section(id byte, content []byte) []byte {
	return slices.Concat([]byte{id}, uleb(uint64(len(content))), content)
}

func vector(items [][]byte) []byte {
	return slices.Concat(append([][]byte{uleb(uint64(len(items)))}, items...)...)
}

func name(s string) []byte { return append(uleb(uint64(len(s))), s...) }

func uleb(v uint64) []byte {
	var out []byte
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(out, b)
		}
		out = append(out, b|0x80)
	}
}

func sleb(v int64) []byte {
	var out []byte
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && b&0x40 == 0) || (v == -1 && b&0x40 != 0) {
			return append(out, b)
		}
		out = append(out, b|0x80)
	}
}

// LocalGet is the instruction `local.get i`.
func LocalGet(i int) []byte { return append([]byte{0x20}, uleb(uint64(i))...) }

// I32Store is `i32.store` of the value to the address below it on the
// stack (alignment 2, offset 0).
func I32Store() []byte { return []byte{0x36, 0x02, 0x00} }

// Drop is the instruction `drop`.
func Drop() []byte { return []byte{0x1a} }
