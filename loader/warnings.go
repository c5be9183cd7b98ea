package loader

import (
	"slices"

	"github.com/loctree/loctree/internal/topology"
	"github.com/loctree/loctree/loader/source"
	"github.com/loctree/loctree/shared"
)

// noteWarnings logs each warning of the tree just installed that the tree
// before it did not have (once, however many rebuilds keep it), with the
// nearest known value, and counts the tree's warnings in the metrics. A
// warning that goes away and comes back is logged again.
func (a *agent) noteWarnings(nodes []shared.NodeSpec) {
	ws := a.builder.Warnings(nodes)
	next := make(map[string]bool, len(ws))
	for _, w := range ws {
		key := w.String()
		if !a.warned[key] && !next[key] {
			a.log.Warn("topology accepted with a warning", "source", a.name, "service", w.Service, "field", w.Field,
				"warning", topology.WarningText(w))
		}
		next[key] = true
	}
	a.warned = next
	a.metrics.setWarnings(len(next))
}

// sourceNodes are the localities sources are known to be in, for the
// warnings of failover from regions: the source's nodes, the agent's
// --locality and its cgroups' localities (the agent's own clients, which a
// topology file need not list as nodes).
func (a *agent) sourceNodes(u source.Update) []shared.NodeSpec {
	nodes := slices.Clip(u.Nodes)
	if a.cfg.Locality != nil {
		nodes = append(nodes, shared.NodeSpec{Name: "--locality", Locality: a.cfg.Locality})
	}
	for dir, loc := range a.cfg.CgroupLocality {
		nodes = append(nodes, shared.NodeSpec{Name: dir, Locality: loc})
	}
	return nodes
}
