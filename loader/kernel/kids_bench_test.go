package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	bpftest "github.com/loctree/loctree/bpf/tests"
	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// nodeMesh is shared's meshTopologyNodes (shared/bench_test.go) as one
// service with a VIP: n endpoints over 6 regions and, below them, zones,
// subzones and nodes that all grow with n (about n/10 nodes); its leaves are
// every node's locality.
func nodeMesh(n int) (*shared.Topology, []shared.Locality) {
	leaves := max(1, n/10)
	zones := min(6, max(3, leaves/1000))
	perZone := max(1, leaves/(6*zones))
	subzones := max(1, int(math.Sqrt(float64(perZone))))
	nodes := max(1, perZone/subzones)
	var locs []shared.Locality
	for r := range 6 {
		for z := range zones {
			for s := range subzones {
				for k := range nodes {
					locs = append(locs, shared.Locality{
						"region":  fmt.Sprintf("region-%d", r),
						"zone":    fmt.Sprintf("region-%d-zone-%c", r, 'a'+z),
						"subzone": fmt.Sprintf("rack-%d", s),
						"node":    fmt.Sprintf("node-%d-%d-%d-%d", r, z, s, k),
					})
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(uint64(n), 2))
	spec := shared.ServiceSpec{Name: "reviews.default.svc.cluster.local", VIP: "127.77.0.1:80",
		Scopes: []string{"region", "zone", "subzone", "node"}, Endpoints: make([]shared.EndpointSpec, n)}
	for i := range n {
		spec.Endpoints[i] = shared.EndpointSpec{
			Address:  fmt.Sprintf("127.%d.%d.%d:9080", 1+i>>16, (i>>8)&255, i&255),
			Locality: locs[rng.IntN(len(locs))],
		}
	}
	return &shared.Topology{Services: []shared.ServiceSpec{spec}}, locs
}

// kernelBench runs the benchmark programs on one installed service.
type kernelBench struct {
	kl      *kernelLookup
	args    bpftest.BenchArgs
	sources int
}

// newKernelBench installs nodeMesh(n) and writes the label vector of every
// leaf, in random order, to the sources map.
func newKernelBench(b *testing.B, n int, loops uint32) *kernelBench {
	top, leaves := nodeMesh(n)
	in, err := Open(Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { in.Close() })
	tree := mustBuild(b, top, 1)
	if _, err := in.Apply(tree); err != nil {
		b.Fatal(err)
	}
	kl := newKernelLookup(b, in)
	svc := tree.Services()[0]
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(leaves), func(i, j int) { leaves[i], leaves[j] = leaves[j], leaves[i] })
	for i, loc := range leaves {
		src := bpftest.BenchSource{Labels: sourceLabels(svc, loc)}
		if err := kl.objs.LtTestSources.Put(uint32(i), &src); err != nil {
			b.Fatalf("source %d of %d: %v", i, len(leaves), err)
		}
	}
	return &kernelBench{kl: kl, args: bpftest.NewBenchArgs(FrontendOf(svc.VIP()), uint32(len(leaves)), loops), sources: len(leaves)}
}

// run runs prog once and returns its time; every lookup must find a
// candidate.
func (kb *kernelBench) run(b *testing.B, prog *ebpf.Program) time.Duration {
	start := time.Now()
	if _, err := prog.Run(&ebpf.RunOptions{Context: kb.args}); err != nil {
		b.Fatal(err)
	}
	d := time.Since(start)
	var out bpftest.BenchArgs
	if err := kb.kl.objs.LtTestBenchRes.Lookup(uint32(0), &out); err != nil {
		b.Fatal(err)
	}
	if out.Found != uint64(kb.args.Loops) {
		b.Fatalf("%d of %d lookups found a candidate", out.Found, kb.args.Loops)
	}
	return d
}

// BenchmarkKernelLookup is the kernel's lookup and pick (bpf/lib/lookup.h, bpf/lib/pick.h) at
// N = 100 … 100,000 endpoints of the four-scope mesh whose zones, subzones
// and nodes grow with N, the source cycling over every leaf: the child
// table (lt_test_bench_table, the socket programs' walk) and the binary
// search it replaced (lt_test_bench_bsearch), alternated on the same maps
// in one run. Each op runs both programs once, loops lookups each; the
// metrics are the medians over the ops of ns per lookup and their ratio.
func BenchmarkKernelLookup(b *testing.B) {
	kerneltest.RequireRoot(b)
	const loops = 1 << 16
	for _, n := range []int{100, 1000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			kb := newKernelBench(b, n, loops)
			var table, bsearch []time.Duration
			for b.Loop() {
				table = append(table, kb.run(b, kb.kl.objs.LtTestBenchTable))
				bsearch = append(bsearch, kb.run(b, kb.kl.objs.LtTestBenchBsearch))
			}
			t, s := median(table)/loops, median(bsearch)/loops
			b.ReportMetric(t, "table-ns/lookup")
			b.ReportMetric(s, "bsearch-ns/lookup")
			b.ReportMetric(t/s, "table/bsearch")
			b.ReportMetric(float64(kb.sources), "leaves")
		})
	}
}

// BenchmarkChildTable is the loader's layout of one 1,000-endpoint
// service's node region (bigService: 1,111 nodes): its records copied and
// its child table built, what a change of the service adds to an apply.
func BenchmarkChildTable(b *testing.B) {
	tree := mustBuild(b, &shared.Topology{Services: []shared.ServiceSpec{bigService("big", "127.78.0.1:80", 1000, 9400)}}, 1)
	s := tree.Services()[0]
	var scratch kidSlots
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := regionOf(tree, s, &scratch); err != nil {
			b.Fatal(err)
		}
	}
}
