// Command filter is loctree's proxy-wasm HTTP filter (bin/loctree.wasm).
//
// Build it with the standard Go compiler as a reactor module:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o bin/loctree.wasm ./filter
//
// Per request it finds the target service (xds.cluster_name, else
// :authority), looks the proxy's locality up in the encoded tree, picks an
// endpoint with the service's policy and writes it into a request header for
// Envoy's OverrideHost load-balancing policy (or, base64-encoded, for the
// stateful-session header). See docs/WASM.md.
package main

import "github.com/loctree/loctree/filter/internal/abi"

func main() {}

func init() { abi.SetVMContext(&vmContext{}) }
