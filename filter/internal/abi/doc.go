// Package abi is the filter's thin facade over the proxy-wasm ABI.
//
// Natively it forwards to the SDK's proxywasm package, so the SDK's
// proxytest emulator drives the filter in unit tests. Under GOOS=wasip1 it
// is the project's own ABI 0.2.1 layer: //go:wasmimport for the host's
// functions and //go:wasmexport for the callbacks, dispatching to the SDK's
// types interfaces, so the standard Go compiler (-buildmode=c-shared) builds
// a reactor module that Envoy (≥ 1.33) and this project's host load. The
// SDK v0.24.0 exports its ABI only under TinyGo.
package abi
