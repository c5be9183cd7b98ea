// Package host runs proxy-wasm modules (ABI 0.2.1, and 0.2.0) on wazero the
// way Envoy runs them.
//
// A [Host] compiles a module once. Each [VM] is one instance of it, as one
// Envoy worker thread owns one: the host calls `_initialize` (reactor) or
// `_start`, then creates the root context and calls `proxy_on_vm_start` and
// `proxy_on_configure`. A [Stream] is one HTTP request through the plugin:
// context create, request headers/body/trailers, response
// headers/body/trailers, then `proxy_on_log`, `proxy_on_done` and
// `proxy_on_delete`.
//
// Every hostcall of the ABI is present, so modules built with any SDK link;
// gRPC calls and foreign functions answer UNIMPLEMENTED. Buffers returned to
// the module are allocated through its `proxy_on_memory_allocate` (or
// `malloc`). Shared data (with compare-and-swap), shared queues and metrics
// are host-wide, shared by every VM. `proxy_http_call` goes to named
// upstreams mapped to real HTTP addresses. Local responses are applied when
// the callback that sent them returns.
//
// A trap or a timeout inside the module fails the request (or the tick) that
// caused it; the VM is marked broken and a [Pool] replaces it. The host
// itself never panics because of a module.
package host
