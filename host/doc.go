// Package host runs proxy-wasm modules (ABI 0.2.1, 0.2.0 and 0.1.0) on wazero
// the way Envoy runs them, following proxy-wasm-cpp-host (the ABI host inside
// Envoy) and, where Envoy adds its own behaviour, Envoy's wasm extension.
//
// A [Host] compiles a module once and links exactly the imports cpp-host
// offers for the module's ABI version: the proxy-wasm "env" functions, two
// emscripten helpers, and Envoy's WASI under both "wasi_snapshot_preview1"
// and "wasi_unstable"; any other import fails the load, naming it. Before its
// first worker VM it starts a base VM (initialisation only) and a
// configuration canary (plugin start, then discarded), as Envoy does. Each
// [VM] is one instance, as one Envoy worker thread owns one: `_initialize`
// then `main` or `__main_void` (or `_start`), restricted to cpp-host's
// allow-list of host functions, then the root context, `proxy_on_vm_start`
// and `proxy_on_configure`. A [Stream] is one HTTP request through the
// plugin: context create, request headers/body/trailers, response
// headers/body/trailers, then `proxy_on_log`, `proxy_on_done` and
// `proxy_on_delete`.
//
// Buffers returned to the module are allocated through its `malloc` (or
// `proxy_on_memory_allocate`). Shared data (with compare-and-swap), shared
// queues and metrics are host-wide, shared by every VM. `proxy_http_call`
// goes to named upstreams mapped to real HTTP addresses. Local responses are
// applied when the callback that sent them returns. gRPC calls and foreign
// functions answer UNIMPLEMENTED.
//
// A trap inside the module (or, with the opt-in CallTimeout, a callback over
// its time limit) fails the request (or the tick) that caused it; the VM is
// marked broken and a [Pool] replaces it. The host itself never panics
// because of a module.
package host
