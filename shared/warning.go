package shared

import (
	"fmt"
	"slices"
)

// Warning is input the tree accepts but that most likely does not do what
// its author meant: a failover region that no endpoint (and, for the
// source side of a rule, no node) has, so the rule never applies. Build
// reports warnings through BuildOptions.Warn, the Builder through
// Warnings; neither refuses the input, since a region may be empty for a
// while (scaled to zero, not yet scheduled).
type Warning struct {
	Service string   // the service whose rule it is
	Field   string   // the field as a topology names it: "failover[0].from"
	Value   string   // the value at fault
	Known   []string // the values that would be meaningful there, sorted: for "did you mean"
	Problem string   // what is wrong, and what follows from it
}

// String is the warning as one line: service, field, value and problem.
func (w Warning) String() string {
	return fmt.Sprintf("service %q: %s %q: %s", w.Service, w.Field, w.Value, w.Problem)
}

// endpointRegions are the distinct regions of endpoints, sorted; an
// endpoint without a region adds none.
func endpointRegions(eps []EndpointSpec) []string {
	var out []string
	last := ""
	for i := range eps {
		r := eps[i].Locality["region"]
		if r == "" || r == last || slices.Contains(out, r) {
			continue
		}
		last = r
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

// regionSet gathers the regions a source may be in: those of every
// endpoint of every service (clients are endpoints of their own services),
// and those of the named nodes.
type regionSet map[string]bool

func (rs regionSet) addNodes(nodes []NodeSpec) {
	for _, n := range nodes {
		if r := n.Locality["region"]; r != "" {
			rs[r] = true
		}
	}
}

func (rs regionSet) add(regions []string) {
	for _, r := range regions {
		rs[r] = true
	}
}

func (rs regionSet) sorted() []string {
	out := make([]string, 0, len(rs))
	for r := range rs {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

// failoverWarnings are the warnings of one service's failover rules: a
// from region no source can be in, a to region none of the service's
// endpoints (own, sorted) is in. Each warning has its own Known: a caller
// may keep or change it.
func failoverWarnings(service string, rules []FailoverSpec, own []string, sources regionSet) []Warning {
	var out []Warning
	for i, r := range rules {
		if !sources[r.From] {
			out = append(out, Warning{Service: service, Field: fmt.Sprintf("failover[%d].from", i), Value: r.From, Known: sources.sorted(),
				Problem: "no endpoint of any service and no node is in this region, so no source matches the rule"})
		}
		if _, ok := slices.BinarySearch(own, r.To); !ok {
			out = append(out, Warning{Service: service, Field: fmt.Sprintf("failover[%d].to", i), Value: r.To, Known: slices.Clone(own),
				Problem: "no endpoint of the service is in this region, so the rule sends no traffic there"})
		}
	}
	return out
}

// buildWarnings are the warnings of top, built into svcs (sorted by name).
// Build finds the regions only when asked for warnings: a map read per
// endpoint that a caller without Warn does not pay for.
func buildWarnings(top *Topology, svcs []*builtService) []Warning {
	sources := regionSet{}
	sources.addNodes(top.Nodes)
	own := make(map[string][]string, len(top.Services))
	for i := range top.Services {
		s := &top.Services[i]
		own[s.Name] = endpointRegions(s.Endpoints)
		sources.add(own[s.Name])
	}
	var out []Warning
	for _, s := range svcs {
		out = append(out, failoverWarnings(s.name, s.failover, own[s.name], sources)...)
		out = append(out, s.localityWarnings()...)
	}
	return out
}

// localityWarnings warn of a spillover service whose priorities may span
// endpoints of several values of a scope before region that the tree does
// not merge: the first one is merged when the copies by the first scope
// rank its other values (network.go decideOther: a leading network under
// the network rule, or a first scope before region, zone or subzone);
// every one is when the copies hold a group per class (groups.go), which
// they do for up to maxGroups classes. Inside such a priority
// the tree draws a locality per value, where Envoy draws one
// region/zone/subzone across them, as istiod groups endpoints by locality
// alone (docs/FORMAT.md, "Priority load"). The shares differ when a
// locality's parts differ in health or weight.
func (s *builtService) localityWarnings() []Warning {
	g := slices.Index(s.scopes, "region")
	if !s.spill || g <= 0 || s.classes {
		return nil // with classes, each has its copies (groups.go)
	}
	var out []Warning
	for d := max(s.minRank, 0); d < g; d++ {
		if d == 0 && s.other != 0 {
			continue
		}
		values := map[uint64]bool{}
		for i := range s.eps {
			values[s.labels[i*len(s.scopes)+d]] = true
		}
		if len(values) < 2 {
			continue
		}
		out = append(out, Warning{Service: s.name, Field: "scopes", Value: s.scopes[d],
			Problem: fmt.Sprintf("a priority that spans several %s values draws a locality per %s, where Envoy draws one region/zone/subzone across them: "+
				"the shares inside it differ from Envoy's when a locality's parts differ in health or weight", s.scopes[d], s.scopes[d])})
		break
	}
	return out
}

// Warnings are the warnings of the builder's services as they are now
// (after the last Update, Revert or Check's restore), in service name
// order: what BuildOptions.Warn reports for the same topology with these
// nodes. A caller that logs them compares with what it logged before; the
// builder keeps no record of what was reported.
func (b *Builder) Warnings(nodes []NodeSpec) []Warning {
	sources := regionSet{}
	sources.addNodes(nodes)
	for _, c := range b.chunks {
		sources.add(c.regions)
	}
	var out []Warning
	for _, name := range b.order {
		c := b.chunks[name]
		if len(c.failover) > 0 {
			out = append(out, failoverWarnings(name, c.failover, c.regions, sources)...)
		}
		out = append(out, c.warnings...)
	}
	return out
}
