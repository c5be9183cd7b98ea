package kernel

import (
	"fmt"
	"testing"

	"github.com/loctree/loctree/shared"
)

// affLoadsTopology is a consistent_hash service with a priority load on
// affVIP: for the source z1, P0 is z1 (2 healthy of 5: health 140·2/5 = 56)
// and P1 z2 (4 healthy: 100), so Envoy's loads are 56 and 44 and both
// priorities get clients.
func affLoadsTopology(timeout uint32) *shared.Topology {
	top := affTopology(timeout, nil)
	spec := &top.Services[0]
	of, threshold := uint32(140), uint32(50)
	spec.Spillover = &shared.SpilloverSpec{OverprovisioningFactor: &of, PanicThreshold: &threshold}
	for i := range 9 {
		e := shared.EndpointSpec{Address: fmt.Sprintf("127.0.12.%d:9400", 1+i), Locality: shared.Locality{"zone": "z1"}}
		switch {
		case i >= 5:
			e.Locality = shared.Locality{"zone": "z2"}
		case i >= 2:
			e.Healthy = boolp(false)
		}
		spec.Endpoints = append(spec.Endpoints, e)
	}
	return top
}

// affPriorityKey is the constant the kernel mixes into a client's hash to
// draw its priority (bpf/lib/priority.h LT_AFF_PRIO_SALT): the priority draw
// and the jump hash inside the priority must not use the same number.
const affPriorityKey = 0x6a09e667f3bcc909

// modelLoadsPick is the endpoint a client with no affinity gets from a
// consistent_hash service with a priority load: Envoy's choosePriority
// (load_balancer_impl.cc: hash % 100 + 1 against the cumulative healthy
// loads) with the client's hash, then bpf/lib/affinity.h's first pick, the jump
// hash of (client, service), over that priority's healthy endpoints as one
// list.
func modelLoadsPick(tree *shared.Tree, client uint64) string {
	s, _ := tree.Service("aff")
	l := s.Loads(affSource)
	h := affinityHash(client, FrontendOf(s.VIP()))
	draw, agg, p := mix64(h^affPriorityKey)%100+1, uint64(0), 0
	for p = range l.N {
		if agg += uint64(l.Healthy[p]); draw <= agg {
			break
		}
	}
	var eps []uint32
	for _, sp := range l.Spans(p)[0] {
		for i := sp.Lo; i < sp.Hi; i++ {
			eps = append(eps, i)
		}
	}
	return tree.Endpoint(eps[jump(h, uint32(len(eps)))]).Addr.String()
}

// TestAffinityInPriority: consistent_hash with a priority load keeps the
// session affinity of a plain service (Kubernetes' ClientIP as Cilium's
// __lb4_affinity_backend_id implements it): each client stays on one
// backend, its first one is the model's (its priority by its hash, then the
// jump hash inside the priority), and clients reach both priorities. Before,
// the kernel picked at random inside a random priority.
func TestAffinityInPriority(t *testing.T) {
	in, tree := affSetup(t, affLoadsTopology(60))
	zones := map[string]int{}
	for range 24 {
		c := newClient(t)
		first := c.pick(t, in)
		if want := modelLoadsPick(tree, c.cookie); first != want {
			t.Fatalf("client %d: kernel picked %s, the model %s", c.cookie, first, want)
		}
		for range 5 {
			if got := c.pick(t, in); got != first {
				t.Fatalf("client %d moved from %s to %s", c.cookie, first, got)
			}
		}
		zones[map[bool]string{true: "z1", false: "z2"}[first < "127.0.12.6"]]++
	}
	if zones["z1"] == 0 || zones["z2"] == 0 { // 24 clients, loads 56/44: P(one priority only) < 1e-5
		t.Fatalf("24 clients reached one priority only: %v", zones)
	}
}
