package host

import (
	"context"
	"strings"
	"testing"

	wt "github.com/loctree/loctree/internal/testing/wasmtest"
)

// TestCallExport: CallExport runs an export outside the ABI with its
// arguments and returns its result; a missing export is an error that
// leaves the VM healthy.
func TestCallExport(t *testing.T) {
	echo := wt.Func{Export: "debug_echo", Params: i32x(1), Results: i32x(1), Body: wt.LocalGet(0)}
	h, err := New(context.Background(), proxyModule("0_2_1", wt.Module{Funcs: []wt.Func{echo}}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	vm, err := h.NewVM(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := vm.CallExport("debug_echo", 41); err != nil || got != 41 {
		t.Fatalf("debug_echo(41) = %d, %v; want 41", got, err)
	}
	if _, err := vm.CallExport("no_such_export"); err == nil || !strings.Contains(err.Error(), `"no_such_export"`) {
		t.Fatalf("missing export: %v", err)
	}
	if err := vm.Err(); err != nil {
		t.Fatalf("the VM broke: %v", err)
	}
}
