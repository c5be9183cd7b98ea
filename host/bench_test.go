package host

import (
	"context"
	"testing"

	wt "github.com/loctree/loctree/internal/testing/wasmtest"
)

// BenchmarkStreamOverhead is the host's own cost of one request: a module
// whose callbacks do nothing, driven through the same stream as the filter
// (context create, request headers, on_log, on_done, on_delete), so the
// difference to filter's BenchmarkFilterRequest is the filter's work.
func BenchmarkStreamOverhead(b *testing.B) {
	nop := func(name string, params, results int) wt.Func {
		f := wt.Func{Export: name, Params: i32x(params), Results: i32x(results)}
		if results > 0 {
			f.Body = wt.I32Const(0)
		}
		return f
	}
	m := proxyModule("0_2_1", wt.Module{Funcs: []wt.Func{nop("proxy_on_request_headers", 3, 1),
		nop("proxy_on_log", 1, 0), {Export: "proxy_on_done", Params: i32x(1), Results: i32x(1), Body: wt.I32Const(1)},
		nop("proxy_on_delete", 1, 0)}})
	h, err := New(context.Background(), m, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(context.Background())
	vm, err := h.NewVM(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	req := &Request{Headers: Headers{{":method", "GET"}, {":path", "/"}, {":authority", "reviews:9080"}, {":scheme", "http"}}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := vm.Do(ctx, req, nil); err != nil {
			b.Fatal(err)
		}
	}
}
