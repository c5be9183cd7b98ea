package loader

import (
	"github.com/loctree/loctree/internal/topology"
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
