package host

import (
	"errors"
	"fmt"

	"github.com/tetratelabs/wazero/api"
)

// callbacks are the module's exports the host calls.
type callbacks struct {
	initialize, start, main, mainVoid, alloc                              api.Function
	contextCreate, vmStart, configure, tick, httpCallResponse, queueReady api.Function
	requestHeaders, requestBody, requestTrailers                          api.Function
	responseHeaders, responseBody, responseTrailers                       api.Function
	log, done, delete                                                     api.Function
}

// export is one function the host may call, with the signature cpp-host
// requires of it (include/proxy-wasm/wasm.h:224-272; src/v8/v8.cc:629-645
// rejects any other).
type export struct {
	name            string
	params, results int // all i32
	dst             *api.Function
}

// exports lists the callbacks of the module's ABI version, as cpp-host
// looks them up (src/wasm.cc:194-204, FOR_ALL_MODULE_FUNCTIONS in
// include/proxy-wasm/wasm.h:274-282). Those with a nil dst are not called by
// this host (TCP, gRPC, metadata, foreign functions) but are checked all the
// same, as cpp-host checks them.
func (c *callbacks) exports(abi string) []export {
	headers := 3
	if abi == abi010 {
		headers = 2 // on_request_headers_abi_01_: (context_id, headers)
	}
	es := []export{
		{"proxy_on_context_create", 2, 0, &c.contextCreate}, {"proxy_on_vm_start", 2, 1, &c.vmStart},
		{"proxy_on_configure", 2, 1, &c.configure}, {"proxy_on_tick", 1, 0, &c.tick},
		{"proxy_on_http_call_response", 5, 0, &c.httpCallResponse}, {"proxy_on_queue_ready", 2, 0, &c.queueReady},
		{"proxy_on_request_headers", headers, 1, &c.requestHeaders}, {"proxy_on_request_body", 3, 1, &c.requestBody},
		{"proxy_on_request_trailers", 2, 1, &c.requestTrailers}, {"proxy_on_response_headers", headers, 1, &c.responseHeaders},
		{"proxy_on_response_body", 3, 1, &c.responseBody}, {"proxy_on_response_trailers", 2, 1, &c.responseTrailers},
		{"proxy_on_log", 1, 0, &c.log}, {"proxy_on_done", 1, 1, &c.done}, {"proxy_on_delete", 1, 0, &c.delete},
		{"proxy_validate_configuration", 2, 1, nil}, {"proxy_on_new_connection", 1, 1, nil},
		{"proxy_on_downstream_data", 3, 1, nil}, {"proxy_on_upstream_data", 3, 1, nil},
		{"proxy_on_downstream_connection_close", 2, 0, nil}, {"proxy_on_upstream_connection_close", 2, 0, nil},
		{"proxy_on_request_metadata", 2, 1, nil}, {"proxy_on_response_metadata", 2, 1, nil},
		{"proxy_on_grpc_receive", 3, 0, nil}, {"proxy_on_grpc_close", 3, 0, nil},
		{"proxy_on_grpc_receive_initial_metadata", 3, 0, nil}, {"proxy_on_grpc_receive_trailing_metadata", 3, 0, nil},
	}
	if abi != abi010 {
		es = append(es, export{"proxy_on_foreign_function", 3, 0, nil})
	}
	return es
}

// bind looks every callback up and checks its full signature, in
// cpp-host's order (src/wasm.cc:159-176): `_initialize` and then `main` and
// `__main_void`, or else `_start`; `malloc`, or else
// `proxy_on_memory_allocate`.
func (c *callbacks) bind(mod api.Module, abi string) error {
	var errs []error
	get := func(dst *api.Function, name string, params, results int) {
		f := lookup(mod, export{name: name, params: params, results: results}, &errs)
		if dst != nil {
			*dst = f
		}
	}
	if get(&c.initialize, "_initialize", 0, 0); c.initialize != nil {
		get(&c.main, "main", 2, 1)
		get(&c.mainVoid, "__main_void", 0, 1)
	} else {
		get(&c.start, "_start", 0, 0)
	}
	if get(&c.alloc, "malloc", 1, 1); c.alloc == nil && mod.ExportedFunction("malloc") == nil {
		get(&c.alloc, "proxy_on_memory_allocate", 1, 1)
	}
	for _, e := range c.exports(abi) {
		get(e.dst, e.name, e.params, e.results)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if c.alloc == nil {
		return fmt.Errorf("%w: malloc (or proxy_on_memory_allocate)", ErrMissingExport)
	}
	if c.contextCreate == nil {
		return fmt.Errorf("%w: proxy_on_context_create", ErrMissingExport)
	}
	return nil
}

// lookup returns the export e names, or nil if absent; a present export of
// another signature adds an error naming both signatures (cpp-host
// src/v8/v8.cc:681-697).
func lookup(mod api.Module, e export, errs *[]error) api.Function {
	f := mod.ExportedFunction(e.name)
	if f == nil {
		return nil
	}
	d := f.Definition()
	want, wantRes := sig(i32Types(e.params)), sig(i32Types(e.results))
	if sig(d.ParamTypes()) != want || sig(d.ResultTypes()) != wantRes {
		*errs = append(*errs, fmt.Errorf("%w: %s: want (%s) -> (%s), the module exports (%s) -> (%s)",
			ErrExportSignature, e.name, want, wantRes, sig(d.ParamTypes()), sig(d.ResultTypes())))
		return nil
	}
	return f
}

func i32Types(n int) []api.ValueType {
	ts := make([]api.ValueType, n)
	for i := range ts {
		ts[i] = api.ValueTypeI32
	}
	return ts
}
