package kernel

import (
	"fmt"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/shared"
	"github.com/loctree/loctree/shared/wire"
)

// The records of one service, as the programs read them (docs/FORMAT.md;
// bpf/lib/maps.h): a node region, an endpoint region, and the frontends
// map value that locates both. Each part's layout lives with its concept
// (kids.go: the child table; widen.go: load-aware widening; priority.go: the aux trees, failover and
// distribute rules; network.go: the network tree; affinity.go: the
// consistent_hash backends); this file puts them together.

// regionOf is what s's node region holds: its records (its tree, and its
// aux trees and rules or its network tree), its child table and, when it
// is load-aware, its widening records (widen.go), and the table's home
// slots. scratch is reused space for placing the table.
func regionOf(t *shared.Tree, s *shared.Service, scratch *kidSlots) ([]byte, uint32, error) {
	nodes, _ := records(t, s)
	aux, rules, net := auxRecords(t, s), append(ruleRecords(s), locRecords(s)...), netRecords(t, s)
	region := make([]byte, 0, len(nodes)+len(aux)+len(rules)+len(net)+int(kidLen(s))*wire.NodeRecordSize)
	region = append(append(append(append(region, nodes...), aux...), rules...), net...)
	region, slots, err := appendKids(region, kidTrees(s), scratch)
	if err != nil {
		return nil, 0, fmt.Errorf("service %s: %w", s.Name(), err)
	}
	widen, err := widenRecords(t, s)
	if err != nil {
		return nil, 0, err
	}
	return append(region, widen...), slots, nil
}

// regionLen is the node map entries p's node region takes: its records,
// its child table and its widening records.
func regionLen(p plan) uint32 { return uint32(len(p.region) / wire.NodeRecordSize) }

// records are the byte ranges of a service's nodes and of the endpoints
// the kernel reads (eligible ones; all of them with a priority load).
func records(t *shared.Tree, s *shared.Service) (nodes, eps []byte) {
	l, sec := layoutOf(s), wire.Split(t.Bytes())
	nodes = wire.Nodes(sec.Nodes, l.Root, l.NodeCount)
	eps = wire.Endpoints(sec.Endpoints, l.EpFirst, epLen(s))
	return nodes, eps
}

// serviceValue is the frontends map value of p's service once its node
// region is written at map index nb and its endpoints at eb.
func serviceValue(t *shared.Tree, p plan, nb, eb uint32) bpf.Service {
	s := p.svc
	v := bpf.Service{
		Src: p.src, ScopeKeys: scopeKeys(s), Digest: p.digest, Generation: t.Generation(),
		Root: nb, NodeDelta: nb - s.Root(), EpDelta: eb - s.FirstEndpoint(),
		NodeBase: nb, NodeLen: regionLen(p), EpBase: eb, EpLen: epLen(s),
		Levels: uint8(s.Levels()), Mode: uint8(s.Mode()), Policy: uint8(s.Policy()), Health: uint8(s.Health()),
		AffinityTimeout: s.AffinityTimeout(),
	}
	setLoads(&v, s, nb)
	setNetworkRule(&v, s, nb)
	setWiden(&v, p, nb)
	v.Kids, v.KidSlots = nb+nodeLen(s), p.kids
	return v
}

// layoutOf is where s's records sit in its tree's blob.
func layoutOf(s *shared.Service) wire.Layout { return wire.ServiceLayout(s.Tree().Bytes(), s.Index()) }
