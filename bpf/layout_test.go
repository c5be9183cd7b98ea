package bpf

import (
	"reflect"
	"testing"
)

// field is one row of a record table in docs/FORMAT.md.
type field struct {
	name   string
	offset uintptr
	size   uintptr
}

// TestRecordLayout checks the generated Go types (and so the C structs)
// against the node and endpoint record tables of docs/FORMAT.md.
func TestRecordLayout(t *testing.T) {
	tests := []struct {
		name   string
		typ    reflect.Type
		size   uintptr
		fields []field
	}{
		{"node", reflect.TypeFor[Node](), 24, []field{
			{"Label", 0, 8}, {"Lo", 8, 4}, {"Hi", 12, 4}, {"FirstChild", 16, 4}, {"ChildCount", 20, 4},
		}},
		{"endpoint", reflect.TypeFor[Endpoint](), 32, []field{
			{"Addr", 0, 16}, {"Port", 16, 2}, {"Family", 18, 1}, {"Flags", 19, 1},
			{"Weight", 20, 4}, {"CumWeight", 24, 8},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.typ.Size(); got != tt.size {
				t.Fatalf("size = %d, want %d", got, tt.size)
			}
			for _, f := range tt.fields {
				sf, ok := tt.typ.FieldByName(f.name)
				if !ok {
					t.Fatalf("no field %s", f.name)
				}
				if sf.Offset != f.offset || sf.Type.Size() != f.size {
					t.Errorf("%s at %d size %d, want %d size %d", f.name, sf.Offset, sf.Type.Size(), f.offset, f.size)
				}
			}
		})
	}
}
