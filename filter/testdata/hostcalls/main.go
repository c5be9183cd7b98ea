// Command hostcalls is the floor (testdata/empty) plus the host calls
// loctree's filter makes on a request that picks with no xds.cluster_name:
// a property read, a request header read (which the host answers through
// proxy_on_memory_allocate) and a header replacement, with a constant
// value. Beside the floor and loctree's filter it splits a request's cost
// into the Go proxy-wasm floor, the ABI's host calls, and loctree's own work
// (BenchmarkRequestAgainstFloor).
package main

import (
	"github.com/loctree/loctree/filter/internal/abi"
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"
)

func main() {}

func init() { abi.SetVMContext(&vmContext{}) }

type vmContext struct{ types.DefaultVMContext }

// NewPluginContext returns a root context that starts and does nothing.
func (*vmContext) NewPluginContext(uint32) types.PluginContext { return &pluginContext{} }

// pluginContext hands every stream the same stateless context.
type pluginContext struct {
	types.DefaultPluginContext
	stream httpContext
}

func (p *pluginContext) NewHttpContext(uint32) types.HttpContext { return &p.stream }

type httpContext struct{ types.DefaultHttpContext }

var clusterNamePath = []string{"xds", "cluster_name"}

// OnHttpRequestHeaders makes loctree's host calls and answers Continue.
func (*httpContext) OnHttpRequestHeaders(int, bool) types.Action {
	if c, err := abi.GetPropertyString(clusterNamePath); err == nil && c != "" {
		return types.ActionContinue
	}
	if a, _ := abi.GetHttpRequestHeader(":authority"); a != "" {
		abi.ReplaceHttpRequestHeader("x-gateway-destination-endpoint", "127.1.0.1:9080")
	}
	return types.ActionContinue
}
