package wasmtest

import (
	"bytes"
	"testing"
)

// TestModuleBytes checks the encoder against a module written out by hand:
// one function () -> i32 returning 300, exported as "f".
func TestModuleBytes(t *testing.T) {
	m := Module{Funcs: []Func{{Export: "f", Results: []byte{I32}, Body: I32Const(300)}}}
	want := []byte{0x00, 'a', 's', 'm', 1, 0, 0, 0,
		1, 5, 1, 0x60, 0, 1, 0x7f, // type section: () -> i32
		2, 1, 0, // no imports
		3, 2, 1, 0, // function 0 has type 0
		7, 5, 1, 1, 'f', 0, 0, // export "f" = func 0
		10, 7, 1, 5, 0, 0x41, 0xac, 0x02, 0x0b} // body: i32.const 300 (LEB128 ac 02), end
	if got := m.Bytes(); !bytes.Equal(got, want) {
		t.Fatalf("got  % x\nwant % x", got, want)
	}
}

func TestLEB128(t *testing.T) {
	for _, c := range []struct {
		v    int64
		s, u []byte
	}{{0, []byte{0}, []byte{0}}, {63, []byte{0x3f}, []byte{0x3f}}, {64, []byte{0xc0, 0}, []byte{0x40}},
		{624485, []byte{0xe5, 0x8e, 0x26}, []byte{0xe5, 0x8e, 0x26}}} {
		if got := sleb(c.v); !bytes.Equal(got, c.s) {
			t.Errorf("sleb(%d) = % x, want % x", c.v, got, c.s)
		}
		if got := uleb(uint64(c.v)); !bytes.Equal(got, c.u) {
			t.Errorf("uleb(%d) = % x, want % x", c.v, got, c.u)
		}
	}
	if got := sleb(-123456); !bytes.Equal(got, []byte{0xc0, 0xbb, 0x78}) {
		t.Errorf("sleb(-123456) = % x", got)
	}
}
