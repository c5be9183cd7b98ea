package kernel

import (
	"cmp"
	"fmt"
	"slices"
	"testing"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// TestLeastConnectionsPicksInsideSpans: least_connections in a priority
// whose eligible endpoints are two spans with another priority's endpoint
// between them (bpf/lib/spans.h lt_pick_first, which resolves both draws
// inline only when both lie in the first non-empty span). Spillover over
// [region, zone, subzone], a source in the middle zone (by label order) of
// r0 but in a subzone no endpoint has: P0 is that zone (.4 healthy, .5-.13
// unhealthy: health 14), P1 the other two zones of r0 (.1-.3, .14-.16),
// two spans around .4; no locality draw (Istio's default scopes, no
// failover rule). With 1,000 connections counted on every endpoint but .4,
// a second draw resolved in the first span past its end lands on .4 and
// wins: every pick must lie in the spans its priority drew from. Red with
// lt_pick_first's "a >= n || b >= n" as "&&" (the helper's finding: no
// test guarded it).
func TestLeastConnectionsPicksInsideSpans(t *testing.T) {
	kerneltest.RequireRoot(t)
	in, plain := openKernelLookup(t, Capacity{Services: 8, Nodes: 1 << 10, Endpoints: 1 << 10})
	kl := &kernelLoads{objs: plain.objs}
	spec := shared.ServiceSpec{Name: "lcs", VIP: "127.77.39.1:80", Policy: "least_connections", Spillover: &shared.SpilloverSpec{}}
	zones := []string{"za", "zb", "zc"}
	slices.SortFunc(zones, func(a, b string) int { return cmp.Compare(shared.Label(a), shared.Label(b)) })
	zone := func(i int) string {
		switch {
		case i <= 3:
			return zones[0]
		case i <= 13:
			return zones[1]
		}
		return zones[2]
	}
	for i := 1; i <= 16; i++ {
		e := shared.EndpointSpec{Address: fmt.Sprintf("127.0.39.%d:80", i), Locality: shared.Locality{"region": "r0", "zone": zone(i), "subzone": "s1"}}
		if i >= 5 && i <= 13 {
			e.Healthy = boolp(false)
		}
		spec.Endpoints = append(spec.Endpoints, e)
	}
	tree := installBuilt(t, in, &shared.Topology{Services: []shared.ServiceSpec{spec}}, 1)
	for i := 1; i <= 16; i++ {
		if i == 4 {
			continue
		}
		k := backendKey(fmt.Sprintf("127.0.39.%d:80", i))
		if err := in.k.objs.LtConns.Put(&k, uint64(1000)); err != nil {
			t.Fatal(err)
		}
	}
	svc, _ := tree.Service("lcs")
	labels := sourceLabels(svc, shared.Locality{"region": "r0", "zone": zones[1], "subzone": "s9"})
	twoSpans := 0
	for range 2000 {
		out := kl.run(t, FrontendOf(svc.VIP()), labels)
		inside, spans := false, 0
		for _, sp := range out.PickSpans {
			if sp.Hi > sp.Lo {
				spans++
			}
			inside = inside || out.Pick >= sp.Lo && out.Pick < sp.Hi
		}
		if !inside {
			t.Fatalf("picked endpoint %d outside the spans drawn from %v", out.Pick-out.EpDelta, out.PickSpans)
		}
		if spans == 2 {
			twoSpans++
		}
	}
	if twoSpans < 1000 { // P1 gets 86 % of the load
		t.Fatalf("%d of 2,000 picks from the two-span priority, want most", twoSpans)
	}
}
