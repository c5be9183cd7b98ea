package shared

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

var benchSizes = []int{100, 1000, 10000, 100000}

// meshTopology spreads n endpoints over a realistic mesh: 6 regions, 3 zones
// per region, 4 subzones per zone (72 leaves), with one service.
func meshTopology(n int) (*Topology, []Locality) { return meshTopologySubzones(n, 4) }

// meshTopologySubzones is meshTopology with subzones subzones per zone.
func meshTopologySubzones(n, subzones int) (*Topology, []Locality) {
	rng := rand.New(rand.NewPCG(uint64(n), 1))
	var leaves []Locality
	for r := range 6 {
		for z := range 3 {
			for s := range subzones {
				leaves = append(leaves, Locality{
					"region":  fmt.Sprintf("region-%d", r),
					"zone":    fmt.Sprintf("region-%d-zone-%c", r, 'a'+z),
					"subzone": fmt.Sprintf("rack-%d", s),
				})
			}
		}
	}
	spec := ServiceSpec{Name: "reviews.default.svc.cluster.local", Endpoints: make([]EndpointSpec, n)}
	for i := range n {
		spec.Endpoints[i] = EndpointSpec{
			Address:  fmt.Sprintf("127.%d.%d.%d:9080", 1+i>>16, (i>>8)&255, i&255),
			Locality: leaves[rng.IntN(len(leaves))],
		}
	}
	return &Topology{Services: []ServiceSpec{spec}}, leaves
}

// benchSources are the sources a benchmark cycles through: every leaf, plus
// localities that match only a region or nothing.
func benchSources(leaves []Locality) []Locality {
	src := append([]Locality{}, leaves...)
	src = append(src, Locality{"region": "region-1", "zone": "elsewhere"}, Locality{"region": "mars"})
	rand.New(rand.NewPCG(7, 7)).Shuffle(len(src), func(i, j int) { src[i], src[j] = src[j], src[i] })
	return src
}

// benchTree builds the mesh of n endpoints and returns its service with the
// benchmark sources, both as localities and prepared.
func benchTree(b *testing.B, n int) (*Tree, *Service, []Locality, []*Source) {
	return benchTreeSubzones(b, n, 4)
}

func benchTreeSubzones(b *testing.B, n, subzones int) (*Tree, *Service, []Locality, []*Source) {
	b.Helper()
	top, leaves := meshTopologySubzones(n, subzones)
	tree, err := Build(top, BuildOptions{})
	if err != nil {
		b.Fatal(err)
	}
	srcs := benchSources(leaves)
	prepared := make([]*Source, len(srcs))
	for i, l := range srcs {
		prepared[i] = NewSource(l)
	}
	return tree, tree.Services()[0], srcs, prepared
}

func BenchmarkLookup(b *testing.B) {
	for _, n := range benchSizes {
		_, svc, srcs, prepared := benchTree(b, n)
		lookups := map[string]func(i int) Range{
			"map":      func(i int) Range { return svc.Lookup(srcs[i%len(srcs)]) },
			"prepared": func(i int) Range { return svc.LookupSource(prepared[i%len(prepared)]) },
		}
		for _, kind := range []string{"map", "prepared"} {
			lookup := lookups[kind]
			b.Run(fmt.Sprintf("src=%s/N=%d", kind, n), func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if lookup(i).Len() == 0 {
						b.Fatal("no candidate")
					}
					i++
				}
			})
		}
	}
}

func BenchmarkBuild(b *testing.B) {
	for _, n := range benchSizes {
		top, _ := meshTopology(n)
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			var tree *Tree
			for b.Loop() {
				var err error
				if tree, err = Build(top, BuildOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(tree.Bytes()))/float64(n), "bytes/endpoint")
		})
	}
}

// ztEndpoint and rankLoop reproduce istio/ztunnel's ProxyState::load_balance
// per connection: rank every endpoint by its matching scope prefix, keep the
// endpoints of maximal rank in a new slice, pick one at random. It is the
// baseline the tree is measured against.
type ztEndpoint struct {
	addr                  string
	region, zone, subzone string
	healthy               bool
}

func rankLoop(eps []ztEndpoint, src *ztEndpoint, rng *rand.Rand) string {
	best := -1
	var cands []*ztEndpoint
	for i := range eps {
		e := &eps[i]
		if !e.healthy {
			continue
		}
		rank := 0
		switch {
		case e.region != src.region:
		case e.zone != src.zone:
			rank = 1
		case e.subzone != src.subzone:
			rank = 2
		default:
			rank = 3
		}
		if rank > best {
			best, cands = rank, cands[:0]
		}
		if rank == best {
			cands = append(cands, e)
		}
	}
	if len(cands) == 0 {
		return ""
	}
	return cands[rng.IntN(len(cands))].addr
}

func BenchmarkRankLoop(b *testing.B) {
	for _, n := range benchSizes {
		top, leaves := meshTopology(n)
		eps := make([]ztEndpoint, n)
		for i, e := range top.Services[0].Endpoints {
			eps[i] = ztEndpoint{e.Address, e.Locality["region"], e.Locality["zone"], e.Locality["subzone"], true}
		}
		var srcs []ztEndpoint
		for _, l := range benchSources(leaves) {
			srcs = append(srcs, ztEndpoint{region: l["region"], zone: l["zone"], subzone: l["subzone"]})
		}
		rng := rand.New(rand.NewPCG(1, 1))
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if rankLoop(eps, &srcs[i%len(srcs)], rng) == "" {
					b.Fatal("no candidate")
				}
				i++
			}
		})
	}
}

// BenchmarkPick is the per-request cost: look a prepared source up and pick
// one endpoint at random in the candidate range.
//
// In N=… every size has the same 72 subzones, so the search among them
// costs the same at every N; in leaves=N÷10/N=… the subzones grow with N
// (about 10 endpoints each, as real meshes spread), so the walk's binary
// searches grow with log N. In nodes=N÷10/N=… the mesh has a fourth scope,
// the node (Istio's failoverPriority kubernetes.io/hostname), and grows in
// every level below the regions: 3 to 6 zones per region, then subzones and
// nodes about equally, about 10 endpoints per node.
func BenchmarkPick(b *testing.B) {
	for _, n := range benchSizes {
		benchPick(b, fmt.Sprintf("N=%d", n), n, 4)
	}
	for _, n := range benchSizes {
		benchPick(b, fmt.Sprintf("leaves=N÷10/N=%d", n), n, max(4, n/180))
	}
	for _, n := range benchSizes {
		top, leaves := meshTopologyNodes(n)
		benchPickTree(b, fmt.Sprintf("nodes=N÷10/N=%d", n), top, leaves)
	}
}

func benchPick(b *testing.B, name string, n, subzones int) {
	top, leaves := meshTopologySubzones(n, subzones)
	benchPickTree(b, name, top, leaves)
}

func benchPickTree(b *testing.B, name string, top *Topology, leaves []Locality) {
	_, svc, srcs := buildPrepared(b, top, leaves)
	benchLookupPick(b, name, svc, srcs)
}

// benchLookupPick looks up and picks for the prepared sources in turn.
func benchLookupPick(b *testing.B, name string, svc *Service, srcs []*Source) {
	p := NewPicker(svc.Tree(), PickerOptions{})
	b.Run(name, func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, ok := p.Pick(svc, svc.LookupSource(srcs[i%len(srcs)]), 0); !ok {
				b.Fatal("no pick")
			}
			i++
		}
	})
}

// meshTopologyNodes spreads n endpoints over 6 regions and, below them,
// zones, subzones and nodes that all grow with n: about n/10 nodes.
func meshTopologyNodes(n int) (*Topology, []Locality) {
	leaves := max(1, n/10)
	zones := min(6, max(3, leaves/1000))
	perZone := max(1, leaves/(6*zones))
	subzones := max(1, int(math.Sqrt(float64(perZone))))
	nodes := max(1, perZone/subzones)
	var locs []Locality
	for r := range 6 {
		for z := range zones {
			for s := range subzones {
				for k := range nodes {
					locs = append(locs, Locality{
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
	spec := ServiceSpec{Name: "reviews.default.svc.cluster.local", Scopes: []string{"region", "zone", "subzone", "node"}, Endpoints: make([]EndpointSpec, n)}
	for i := range n {
		spec.Endpoints[i] = EndpointSpec{
			Address:  fmt.Sprintf("127.%d.%d.%d:9080", 1+i>>16, (i>>8)&255, i&255),
			Locality: locs[rng.IntN(len(locs))],
		}
	}
	return &Topology{Services: []ServiceSpec{spec}}, locs
}

// spillTree is benchTree's mesh with spillover on and a mix of health: every
// 7th endpoint degraded, every 5th unhealthy, so all three trees are walked.
func spillTree(b testing.TB, n int) (*Tree, *Service, []*Source) {
	return spillTreeHealth(b, n, true)
}

// spillMesh is meshTopology with spillover on, and the health mix of
// spillTree when mixed.
func spillMesh(n int, mixed bool) (*Topology, []Locality) {
	top, leaves := meshTopology(n)
	spec := &top.Services[0]
	spec.Spillover = &SpilloverSpec{}
	f := false
	for i := range spec.Endpoints {
		if !mixed {
			break
		}
		switch {
		case i%5 == 0:
			spec.Endpoints[i].Healthy = &f
		case i%7 == 0:
			spec.Endpoints[i].Degraded = true
		}
	}
	return top, leaves
}

// spillTreeHealth is spillTree, with the health mix or all healthy.
func spillTreeHealth(b testing.TB, n int, mixed bool) (*Tree, *Service, []*Source) {
	top, leaves := spillMesh(n, mixed)
	return buildPrepared(b, top, leaves)
}

// buildPrepared builds top and prepares the benchmark sources of its leaves.
func buildPrepared(b testing.TB, top *Topology, leaves []Locality) (*Tree, *Service, []*Source) {
	tree, err := Build(top, BuildOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var srcs []*Source
	for _, l := range benchSources(leaves) {
		srcs = append(srcs, NewSource(l))
	}
	return tree, tree.Services()[0], srcs
}

// benchCachedLoads picks by loads computed once per source.
func benchCachedLoads(b *testing.B, name string, svc *Service, srcs []*Source) {
	p := NewPicker(svc.Tree(), PickerOptions{})
	cached := make([]Loads, len(srcs))
	for i, src := range srcs {
		svc.LoadsSource(src, &cached[i])
	}
	b.Run(name, func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, ok := p.PickLoads(svc, &cached[i%len(cached)], 0); !ok {
				b.Fatal("no pick")
			}
			i++
		}
	})
}

// benchFreshLoads computes a source's loads on every pick.
func benchFreshLoads(b *testing.B, name string, svc *Service, srcs []*Source) {
	p := NewPicker(svc.Tree(), PickerOptions{})
	b.Run(name, func(b *testing.B) {
		b.ReportAllocs()
		var l Loads
		i := 0
		for b.Loop() {
			svc.LoadsSource(srcs[i%len(srcs)], &l)
			if _, ok := p.PickLoads(svc, &l, 0); !ok {
				b.Fatal("no pick")
			}
			i++
		}
	})
}

// BenchmarkPickLoads is BenchmarkPick with spillover: compute the priority
// loads of a prepared source (three tree walks) and pick by them (loads=fresh),
// or pick by loads computed once per source (loads=cached: what a data plane
// with a fixed source locality does, as Envoy recomputes its loads only when
// hosts change).
func BenchmarkPickLoads(b *testing.B) {
	for _, n := range benchSizes {
		_, svc, srcs := spillTree(b, n)
		benchCachedLoads(b, fmt.Sprintf("loads=cached/N=%d", n), svc, srcs)
		_, healthySvc, _ := spillTreeHealth(b, n, false)
		benchFreshLoads(b, fmt.Sprintf("loads=fresh-all-healthy/N=%d", n), healthySvc, srcs)
		benchFreshLoads(b, fmt.Sprintf("loads=fresh/N=%d", n), svc, srcs)
	}
}

// BenchmarkPickLoadsLocality measures the locality draw inside a priority
// (locality.go): cached loads of sources whose subzone has no endpoint, so
// that the priority drawn is a zone of several subzones, on spillTree's
// mesh without a failover rule (loads=cached-zone: no draw) and with one
// per region (loads=cached-locality: istiod turns locality weighting on,
// every pick draws a locality first); loads=fresh-zone and
// loads=fresh-locality compute the loads for every pick as well.
func BenchmarkPickLoadsLocality(b *testing.B) {
	for _, n := range benchSizes {
		for _, rules := range []bool{false, true} {
			top, leaves := spillMesh(n, true)
			if rules {
				for r := range 6 {
					top.Services[0].Failover = append(top.Services[0].Failover,
						FailoverSpec{From: fmt.Sprintf("region-%d", r), To: fmt.Sprintf("region-%d", (r+1)%6)})
				}
			}
			var zones []Locality
			for _, l := range leaves {
				zones = append(zones, Locality{"region": l["region"], "zone": l["zone"], "subzone": "rack-none"})
			}
			_, svc, srcs := buildPrepared(b, top, zones)
			name := map[bool]string{false: "cached-zone", true: "cached-locality"}[rules]
			if rules && svc.LocalityDepth() == 0 {
				b.Fatal("no locality weighting")
			}
			benchCachedLoads(b, fmt.Sprintf("loads=%s/N=%d", name, n), svc, srcs)
			benchFreshLoads(b, fmt.Sprintf("loads=%s/N=%d", strings.Replace(name, "cached", "fresh", 1), n), svc, srcs)
		}
	}
}

// TestPickLoadsDoesNotAllocate asserts the spillover hot path allocates
// nothing, for every policy (one benchmark run; the policy rotates).
func TestPickLoadsDoesNotAllocate(t *testing.T) {
	tree, svc, srcs := spillTree(t, 1000)
	p := NewPicker(tree, PickerOptions{})
	res := testing.Benchmark(func(b *testing.B) {
		var l Loads
		for i := 0; b.Loop(); i++ {
			svc.policy = Policy(i % len(policyNames)) // the picker reads the policy from the Service
			svc.LoadsSource(srcs[i%len(srcs)], &l)
			p.PickLoads(svc, &l, uint64(i))
		}
	})
	if a := res.AllocsPerOp(); a != 0 {
		t.Fatalf("%d allocations per lookup and pick", a)
	}
}

// distributeTree is spillTree's mesh (with its health mix) with a
// distribute rule per region but the last: 60 % to the source's zone a,
// 30 % to the next region, 10 % to its zone b's rack-0.
func distributeTree(b testing.TB, n int) (*Tree, *Service, []*Source) {
	top, leaves := spillMesh(n, true)
	spec := &top.Services[0]
	for r := range 5 {
		spec.Distribute = append(spec.Distribute, DistributeSpec{From: fmt.Sprintf("region-%d", r), To: map[string]uint32{
			fmt.Sprintf("region-%d/region-%d-zone-a", r, r): 60, fmt.Sprintf("region-%d", (r+1)%6): 30,
			fmt.Sprintf("region-%d/region-%d-zone-b/rack-0", r, r): 10,
		}})
	}
	return buildPrepared(b, top, leaves)
}

// BenchmarkPickDistribute is BenchmarkPickLoads for a service with
// distribute rules (and the health mix): loads cached per source, or
// computed per pick.
func BenchmarkPickDistribute(b *testing.B) {
	for _, n := range benchSizes {
		_, svc, srcs := distributeTree(b, n)
		benchCachedLoads(b, fmt.Sprintf("loads=cached/N=%d", n), svc, srcs)
		benchFreshLoads(b, fmt.Sprintf("loads=fresh/N=%d", n), svc, srcs)
	}
}

// BenchmarkPickNetworkRule is BenchmarkPick on the mesh with network as the
// first scope, its endpoints on three networks: a source on one of them
// (network=net-1: the rule does not fire) and a source on a fourth network
// (network=net-9: every lookup misses at the root and walks the network
// tree).
func BenchmarkPickNetworkRule(b *testing.B) {
	for _, n := range benchSizes {
		top, leaves := meshTopology(n)
		spec := &top.Services[0]
		spec.Scopes = []string{"network", "region", "zone", "subzone"}
		for i := range spec.Endpoints {
			loc := Locality{"network": fmt.Sprintf("net-%d", i%3+1)}
			for k, v := range spec.Endpoints[i].Locality {
				loc[k] = v
			}
			spec.Endpoints[i].Locality = loc
		}
		tree, err := Build(top, BuildOptions{})
		if err != nil {
			b.Fatal(err)
		}
		svc := tree.Services()[0]
		for _, network := range []string{"net-1", "net-9"} {
			var srcs []*Source
			for _, l := range benchSources(leaves) {
				loc := Locality{"network": network}
				for k, v := range l {
					loc[k] = v
				}
				srcs = append(srcs, NewSource(loc))
			}
			benchLookupPick(b, fmt.Sprintf("network=%s/N=%d", network, n), svc, srcs)
		}
	}
}

// BenchmarkPickLoadsClasses measures the classes before the locality
// (groups.go): spillMesh with its endpoints on 3 networks and 4 clusters
// each (network and cluster before region, a failover rule per region,
// the sources on each network and cluster): loads computed per pick
// (loads=fresh-classes: the own trees and the three groups' walks) and
// cached; loads=fresh-plain is the same mesh and rules without the two
// scopes before region, for the ratio. Build/N= is a whole Build of the
// service with the classes, whose copies grow with the endpoints times
// the networks and clusters (reported as copies/op).
func BenchmarkPickLoadsClasses(b *testing.B) {
	for _, n := range benchSizes {
		top, leaves := spillMesh(n, true)
		spec := &top.Services[0]
		for r := range 6 {
			spec.Failover = append(spec.Failover, FailoverSpec{From: fmt.Sprintf("region-%d", r), To: fmt.Sprintf("region-%d", (r+1)%6)})
		}
		_, plain, plainSrcs := buildPrepared(b, top, leaves)
		benchFreshLoads(b, fmt.Sprintf("loads=fresh-plain/N=%d", n), plain, plainSrcs)
		spec.Scopes = []string{"network", "cluster", "region", "zone", "subzone"}
		for i := range spec.Endpoints {
			loc := Locality{"network": fmt.Sprintf("net-%d", i%3), "cluster": fmt.Sprintf("net-%d-c%d", i%3, i/3%4)}
			for k, v := range spec.Endpoints[i].Locality {
				loc[k] = v
			}
			spec.Endpoints[i].Locality = loc
		}
		var srcLeaves []Locality
		for i, l := range leaves {
			loc := Locality{"network": fmt.Sprintf("net-%d", i%3), "cluster": fmt.Sprintf("net-%d-c%d", i%3, i%4)}
			for k, v := range l {
				loc[k] = v
			}
			srcLeaves = append(srcLeaves, loc)
		}
		tree, svc, srcs := buildPrepared(b, top, srcLeaves)
		if !svc.ClassesBeforeLocality() {
			b.Fatal("no classes")
		}
		benchFreshLoads(b, fmt.Sprintf("loads=fresh-classes/N=%d", n), svc, srcs)
		benchCachedLoads(b, fmt.Sprintf("loads=cached-classes/N=%d", n), svc, srcs)
		b.Run(fmt.Sprintf("Build/N=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := Build(top, BuildOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(tree.NumEndpoints()-n), "copies/op")
		})
	}
}
