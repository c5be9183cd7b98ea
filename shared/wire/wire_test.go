package wire_test

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/loctree/loctree/internal/testing/treetest"
	"github.com/loctree/loctree/shared"
	"github.com/loctree/loctree/shared/wire"
)

// TestServiceLayoutExactBytes reads a layout from a blob written by hand,
// field by field from docs/FORMAT.md ("Header", "Service record", "Policy
// record"), with no encoder involved. Only the fields the layout reads are
// set; Split and ServiceLayout do not validate.
func TestServiceLayoutExactBytes(t *testing.T) {
	const nSvc, nNodes, nEps, nAux = 2, 5, 7, 6
	nodesOff := 64 + 64*nSvc
	epsOff := nodesOff + 24*nNodes
	polsOff := epsOff + 32*nEps
	auxOff := polsOff + 32*nSvc
	strOff := auxOff + 24*nAux
	b := make([]byte, strOff)
	le := binary.LittleEndian
	le.PutUint32(b[28:], nSvc)
	le.PutUint32(b[32:], nNodes)
	le.PutUint32(b[36:], nEps)
	le.PutUint32(b[44:], 64)
	le.PutUint32(b[48:], uint32(nodesOff))
	le.PutUint32(b[52:], uint32(epsOff))
	le.PutUint32(b[56:], uint32(strOff))
	le.PutUint32(b[60:], nAux)
	svc := b[64+64:] // service 1
	for off, v := range map[int]uint32{0: 2, 4: 3, 8: 4, 12: 1, 16: 3} {
		le.PutUint32(svc[off:], v) // root, node_count, ep_first, ep_eligible, ep_total
	}
	pol := b[polsOff+32:] // its policy record
	for off, v := range map[int]uint32{0: 2, 4: 1, 8: 3, 12: 1, 16: 1, 28: 2} {
		le.PutUint32(pol[off:], v) // degraded root/count, unhealthy root/count, ep_degraded, network_node_count
	}
	pol[26] = 1 // network_rule

	sec := wire.Split(b)
	if len(sec.Services) != 64*nSvc || len(sec.Nodes) != 24*nNodes || len(sec.Endpoints) != 32*nEps ||
		len(sec.Policies) != 32*nSvc || len(sec.Aux) != 24*nAux {
		t.Fatalf("sections of %d/%d/%d/%d/%d bytes", len(sec.Services), len(sec.Nodes), len(sec.Endpoints), len(sec.Policies), len(sec.Aux))
	}
	want := wire.Layout{Root: 2, NodeCount: 3, EpFirst: 4, EpEligible: 1, EpDegraded: 1, EpTotal: 3,
		AuxRoot: [2]uint32{2, 3}, AuxCount: [2]uint32{1, 1}, NetRoot: 4, NetCount: 2}
	if got := wire.ServiceLayout(b, 1); got != want {
		t.Fatalf("layout %+v, want %+v", got, want)
	}
}

// TestServiceLayoutTilesTrees checks, on random built trees, that the
// layouts agree with the decoded view and that the services' records tile
// every section, one service after the other, as docs/FORMAT.md says.
func TestServiceLayoutTilesTrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 4))
	for i := range 200 {
		o := treetest.Options{Services: 1 + rng.IntN(6), IPv6: i%2 == 0, NetworkFirst: i%3 == 0}
		tree, err := shared.Build(treetest.Topology(rng, o), shared.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkTiles(t, tree)
	}
}

func checkTiles(t *testing.T, tree *shared.Tree) {
	t.Helper()
	var nodes, eps, aux uint32
	for _, s := range tree.Services() {
		l := wire.ServiceLayout(tree.Bytes(), s.Index())
		if l.Root != s.Root() || l.EpFirst != s.FirstEndpoint() || l.EpEligible != s.EligibleCount() ||
			l.EpDegraded != s.DegradedCount() || l.EpTotal != s.EndpointCount() {
			t.Fatalf("%s: layout %+v, decoded root %d, endpoints %d+%d/%d from %d", s.Name(), l, s.Root(), s.EligibleCount(), s.DegradedCount(), s.EndpointCount(), s.FirstEndpoint())
		}
		if l.Root != nodes || l.EpFirst != eps || l.AuxRoot[0] != aux || l.AuxRoot[1] != aux+l.AuxCount[0] || l.NetRoot != aux+l.AuxLen() {
			t.Fatalf("%s: layout %+v does not follow the previous service (nodes %d, endpoints %d, aux %d)", s.Name(), l, nodes, eps, aux)
		}
		if (l.NetCount > 0) != s.NetworkRule() {
			t.Fatalf("%s: network tree of %d nodes, network rule %v", s.Name(), l.NetCount, s.NetworkRule())
		}
		nodes += l.NodeCount
		eps += l.EpTotal
		if s.NetworkRule() {
			eps += l.EpEligible // the network tree's copies of the eligible endpoints
		}
		aux += l.AuxLen() + l.NetCount
	}
	sec := wire.Split(tree.Bytes())
	if int(nodes)*wire.NodeRecordSize != len(sec.Nodes) || int(eps)*wire.EndpointRecordSize != len(sec.Endpoints) ||
		int(aux)*wire.NodeRecordSize != len(sec.Aux) {
		t.Fatalf("services cover %d nodes, %d endpoints, %d aux nodes; sections hold %d, %d, %d bytes", nodes, eps, aux, len(sec.Nodes), len(sec.Endpoints), len(sec.Aux))
	}
}
