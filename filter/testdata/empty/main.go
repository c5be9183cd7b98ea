// Command empty is the floor of a Go proxy-wasm filter: the same compiler,
// flags (`-buildmode=c-shared`, GOOS=wasip1) and ABI layer
// (filter/internal/abi) as loctree's filter, with a VM, plugin and HTTP
// context that do nothing and answer Continue to every callback. The
// filter's benchmarks run it beside loctree's module to measure the
// distance between the two (BenchmarkFloor, TestVMMemory).
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

// pluginContext hands every stream the same stateless context, so a
// request allocates nothing in the VM (as loctree's filter reuses its
// stream contexts).
type pluginContext struct {
	types.DefaultPluginContext
	stream httpContext
}

func (p *pluginContext) NewHttpContext(uint32) types.HttpContext { return &p.stream }

type httpContext struct{ types.DefaultHttpContext }
