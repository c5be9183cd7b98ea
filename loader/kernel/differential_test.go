package kernel

import (
	"math/rand/v2"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/loctree/loctree/bpf"
	bpftest "github.com/loctree/loctree/bpf/tests"
	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/internal/testing/treetest"
	"github.com/loctree/loctree/shared"
)

// kernelLookup runs the kernel's lookup (loctree.h) through the test-only
// programs on the installer's maps.
type kernelLookup struct {
	objs *bpftest.Objects
}

func newKernelLookup(t testing.TB, in *Installer) *kernelLookup {
	t.Helper()
	objs, err := bpftest.Load(&in.k.objs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { objs.Close() })
	return &kernelLookup{objs: objs}
}

// openKernelLookup opens an installer with maps of capacity c, closed when
// the test ends, and the test programs on its maps.
func openKernelLookup(t testing.TB, c Capacity) (*Installer, *kernelLookup) {
	t.Helper()
	in, err := Open(Config{Capacity: c})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	return in, newKernelLookup(t, in)
}

// installBuilt builds top as generation gen and applies it over what in
// holds.
func installBuilt(t testing.TB, in *Installer, top *shared.Topology, gen uint64) *shared.Tree {
	t.Helper()
	tree := mustBuild(t, top, gen)
	if _, err := in.Apply(tree); err != nil {
		t.Fatalf("tree %d: %v", gen, err)
	}
	return tree
}

func (kl *kernelLookup) lookup(t testing.TB, args bpftest.Args) bpftest.Args {
	t.Helper()
	if _, err := kl.objs.LtTestLookup.Run(&ebpf.RunOptions{Context: args}); err != nil {
		t.Fatalf("run test program: %v", err)
	}
	var out bpftest.Args
	if err := kl.objs.LtTestOut.Lookup(uint32(0), &out); err != nil {
		t.Fatal(err)
	}
	if out.Fe != args.Fe {
		t.Fatalf("test program did not run for %+v", args.Fe)
	}
	return out
}

// TestKernelLookupMatchesGo is the differential test: for random trees and
// sources (more than 1,000 pairs), the kernel's lookup gives the same
// range, depth and node as shared's LookupLabels, and its pick lies in
// the range. Consecutive trees are applied over each other, so the test
// also covers incremental installs.
func TestKernelLookupMatchesGo(t *testing.T) {
	kerneltest.RequireRoot(t)
	in, kl := openKernelLookup(t, Capacity{Services: 64, Nodes: 1 << 14, Endpoints: 1 << 14})
	rng := rand.New(rand.NewPCG(5, 6))
	policies := []string{"random", "weighted", "round_robin", "least_connections", "least_request"}
	pairs := 0
	for it := range 150 {
		top := treetest.Topology(rng, treetest.Options{Services: 1 + rng.IntN(12), IPv6: true, Policies: policies})
		tree := installBuilt(t, in, top, uint64(it+1))
		for _, s := range tree.Services() {
			for range 2 {
				compare(t, kl, in, s, treetest.Source(rng, s.Scopes(), 5))
				pairs++
			}
			compareCgroup(t, kl, in, s, treetest.Source(rng, treetest.Scopes, 5))
			pairs++
		}
	}
	if pairs < 1000 {
		t.Fatalf("only %d pairs", pairs)
	}
	t.Logf("%d (tree, source) pairs agree", pairs)
}

// TestKernelNetworkRuleMatchesGo is the differential test of ztunnel's
// network rule (docs/FORMAT.md "Network rule"): for services whose first
// scope is network and sources on networks with and without eligible
// endpoints (network-4 is on no endpoint), the kernel's lookup gives
// shared's range, depth and node, from the network tree when the source's
// network has none. Fails if the loader does not mark the rule or
// misplaces the network tree.
func TestKernelNetworkRuleMatchesGo(t *testing.T) {
	kerneltest.RequireRoot(t)
	in, kl := openKernelLookup(t, Capacity{Services: 64, Nodes: 1 << 14, Endpoints: 1 << 14})
	rng := rand.New(rand.NewPCG(8, 11))
	policies := []string{"random", "weighted", "round_robin", "least_connections", "least_request"}
	pairs, cross := 0, 0
	for it := range 150 {
		top := treetest.Topology(rng, treetest.Options{Services: 1 + rng.IntN(12), IPv6: true, Policies: policies, NetworkFirst: true})
		tree := installBuilt(t, in, top, uint64(it+1))
		for _, s := range tree.Services() {
			for range 3 {
				src := treetest.Source(rng, s.Scopes(), 5)
				if s.CrossNetwork(s.Lookup(src)) {
					cross++
				}
				compare(t, kl, in, s, src)
				pairs++
			}
			compareCgroup(t, kl, in, s, treetest.Source(rng, treetest.Scopes, 5))
			pairs++
		}
	}
	if pairs < 1000 || cross < 200 {
		t.Fatalf("only %d pairs, %d answered by the network rule", pairs, cross)
	}
	t.Logf("%d (tree, source) pairs agree, %d answered by the network rule", pairs, cross)
}

func compare(t *testing.T, kl *kernelLookup, in *Installer, s *shared.Service, src shared.Locality) {
	t.Helper()
	fe := FrontendOf(s.VIP())
	labels := sourceLabels(s, src)
	check(t, in, s, src, s.LookupLabels(labels[:s.Levels()]), kl.lookup(t, bpftest.NewArgs(fe, labels, 0)))
}

// compareCgroup is compare with the source given as a cgroup's own
// locality (scope keys and values, matched to the service's scopes in the
// kernel) instead of precomputed labels.
func compareCgroup(t *testing.T, kl *kernelLookup, in *Installer, s *shared.Service, src shared.Locality) {
	t.Helper()
	const fakeCgroup = 1 << 40
	if err := in.setCgroupLocality(fakeCgroup, 0, src); err != nil {
		t.Fatal(err)
	}
	check(t, in, s, src, s.Lookup(src), kl.lookup(t, bpftest.NewCgroupArgs(FrontendOf(s.VIP()), fakeCgroup)))
}

func check(t *testing.T, in *Installer, s *shared.Service, src shared.Locality, want shared.Range, got bpftest.Args) {
	t.Helper()
	svc := in.installed[FrontendOf(s.VIP())]
	if want.Len() == 0 {
		if got.Status != bpf.StatNoCandidate {
			t.Fatalf("%s %v (%s): Go has no candidate, kernel status %d range %+v", s.Name(), src, s.Mode(), got.Status, got.R)
		}
		return
	}
	if s.CrossNetwork(want) { // the network tree follows the service's own in its node region
		want.Node = s.Root() + layoutOf(s).NodeCount + want.Node - uint32(s.Tree().NumNodes()) - layoutOf(s).NetRoot
	}
	r := shared.Range{Lo: got.R.Lo - svc.EpDelta, Hi: got.R.Hi - svc.EpDelta, Depth: int(got.R.Depth), Node: got.R.Node - svc.NodeDelta}
	if got.Status != bpf.StatRedirect || r != want {
		t.Fatalf("%s %v (%s): kernel status %d range %+v, Go %+v", s.Name(), src, s.Mode(), got.Status, r, want)
	}
	if got.Pick < got.R.Lo || got.Pick >= got.R.Hi {
		t.Fatalf("%s %v: kernel picked %d outside [%d, %d)", s.Name(), src, got.Pick, got.R.Lo, got.R.Hi)
	}
}
