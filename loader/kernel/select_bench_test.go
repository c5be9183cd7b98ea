package kernel

import (
	"net/netip"
	"testing"
	"time"

	bpftest "github.com/loctree/loctree/bpf/tests"
	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// BenchmarkKernelSelect is the pick of a service with a priority load as
// a connect makes it (lt_test_bench_loads: the state taken and bound,
// lt_select_in, given back) from the node's locality, without the connect
// around it: the spillover services of BenchmarkConnect at 1,000
// endpoints, every pick after the first on the loads the first computed.
// Each op runs the program once, loops picks; the metric is the median
// over the ops of ns per pick.
func BenchmarkKernelSelect(b *testing.B) {
	kerneltest.RequireRoot(b)
	const port, n, loops = 9300, 1000, 1 << 16
	services := []shared.ServiceSpec{spilloverService("spill", "127.77.3.2:80", n, port),
		localityService("loc", "127.77.3.5:80", n, port), networkSpillService("netspill", "127.77.3.6:80", n, port),
		clusterSpillService("cluspill", "127.77.3.8:80", n, port)}
	in, err := Open(Config{Locality: benchLocality})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { in.Close() })
	tree := mustBuild(b, &shared.Topology{Services: services}, 1)
	if _, err := in.Apply(tree); err != nil {
		b.Fatal(err)
	}
	kb := &kernelBench{kl: newKernelLookup(b, in)}
	for i, name := range []string{"spillover", "spillover-locality", "spillover-network", "spillover-cluster"} {
		b.Run(name, func(b *testing.B) {
			kb.args = bpftest.NewBenchArgs(FrontendOf(netip.MustParseAddrPort(services[i].VIP)), 0, loops)
			var took []time.Duration
			for b.Loop() {
				took = append(took, kb.run(b, kb.kl.objs.LtTestBenchLoads))
			}
			b.ReportMetric(median(took)/loops, "ns/pick")
		})
	}
}
