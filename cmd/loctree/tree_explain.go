package main

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/loctree/loctree/internal/topology"
	"github.com/loctree/loctree/shared"
)

// explainMatch says why a lookup matched fewer scopes than the service has:
// what the source left out, a value no endpoint has (with the nearest
// names: a typo), or a value whose endpoints are all ineligible (with
// their addresses, when the topology is at hand; top may be nil). typo is
// the note about a value that no eligible endpoint has anywhere.
func explainMatch(svc *shared.Service, top *shared.Topology, src shared.Locality, r shared.Range) (notes []string, typo string) {
	if len(src) == 0 {
		notes = append(notes, "no --from or --node: the source locality is empty, so it matches only endpoints whose "+svc.Scope(0)+" is empty too")
	}
	if svc.CrossNetwork(r) {
		return append(notes, networkRuleNote(svc, src, r)), ""
	}
	if r.Depth >= svc.Levels() {
		return notes, ""
	}
	scope := svc.Scope(r.Depth)
	v, given := src[scope]
	prefix := matchedPrefix(svc, src, r.Depth)
	values := scopeValues(svc, r.Depth)
	switch {
	case !given && len(src) > 0:
		notes = append(notes, fmt.Sprintf("--from gives no %s, so the walk stops after %d of %d scopes", scope, r.Depth, svc.Levels()))
	case !given:
	case !values[v]:
		typo = fmt.Sprintf("%q is not a %s of any eligible endpoint of %s (nearest: %s)", v, scope, svc.Name(), strings.Join(nearest(v, values, 3), ", "))
		notes = append(notes, typo+ineligibleSuffix(svc, top, src, r.Depth))
	default:
		there := childValues(svc, src, r.Depth)
		notes = append(notes, fmt.Sprintf("no eligible endpoint has %s=%s under %s%s (there: %s)",
			scope, v, describePrefix(prefix), ineligibleSuffix(svc, top, src, r.Depth), strings.Join(there, ", ")))
	}
	var unused []string
	for _, sc := range svc.Scopes()[r.Depth+1:] {
		if val, ok := src[sc]; ok {
			unused = append(unused, sc+"="+val)
		}
	}
	if len(unused) > 0 {
		notes = append(notes, fmt.Sprintf("%s is not used: scopes after the first mismatch do not count", strings.Join(unused, ", ")))
	}
	if r.Len() > 0 && svc.Mode() == shared.ModeFailover {
		notes = append(notes, fmt.Sprintf("failover: the candidates are the eligible endpoints %s", describeMatched(prefix)))
	}
	return notes, typo
}

// networkRuleNote explains a candidate set of ztunnel's network rule.
func networkRuleNote(svc *shared.Service, src shared.Locality, r shared.Range) string {
	var prefix []string
	for _, sc := range svc.Scopes()[1 : 1+r.Depth] {
		prefix = append(prefix, sc+"="+src[sc])
	}
	return fmt.Sprintf("no eligible endpoint is on network %q: by ztunnel's network rule the candidates are the other networks' eligible endpoints %s",
		src["network"], describeMatched(prefix))
}

// matchedPrefix is the source's values of the first depth scopes.
func matchedPrefix(svc *shared.Service, src shared.Locality, depth int) []string {
	var out []string
	for _, sc := range svc.Scopes()[:depth] {
		out = append(out, sc+"="+src[sc])
	}
	return out
}

func describePrefix(prefix []string) string {
	if len(prefix) == 0 {
		return "the root"
	}
	return strings.Join(prefix, ", ")
}

func describeMatched(prefix []string) string {
	if len(prefix) == 0 {
		return "of every locality (nothing matched)"
	}
	return "under " + strings.Join(prefix, ", ")
}

// ineligibleSuffix names the ineligible endpoints that would have matched
// one more scope (": 127.0.2.4:9080 is unhealthy"), from the topology.
func ineligibleSuffix(svc *shared.Service, top *shared.Topology, src shared.Locality, depth int) string {
	spec := serviceSpec(svc, top)
	if spec == nil {
		return ""
	}
	var addrs []string
	for _, ep := range spec.Endpoints {
		if ep.Healthy != nil && !*ep.Healthy && svc.Health() == shared.HealthOnlyHealthy && matchesFirst(svc.Scopes()[:depth+1], ep.Locality, src) {
			if ap, err := netip.ParseAddrPort(ep.Address); err == nil {
				addrs = append(addrs, ap.String())
			} else {
				addrs = append(addrs, ep.Address)
			}
		}
	}
	switch len(addrs) {
	case 0:
		return ""
	case 1:
		return ": " + addrs[0] + " is unhealthy"
	}
	return ": " + strings.Join(addrs, ", ") + " are unhealthy"
}

func matchesFirst(scopes []string, a, b shared.Locality) bool {
	for _, sc := range scopes {
		if a[sc] != b[sc] {
			return false
		}
	}
	return true
}

// serviceSpec is the topology's spec of svc (nil without a topology).
func serviceSpec(svc *shared.Service, top *shared.Topology) *shared.ServiceSpec {
	if top == nil {
		return nil
	}
	for i := range top.Services {
		if top.Services[i].Name == svc.Name() {
			return &top.Services[i]
		}
	}
	return nil
}

// scopeValues is every value of scope number depth in svc's tree.
func scopeValues(svc *shared.Service, depth int) map[string]bool {
	out := map[string]bool{}
	var walk func(i uint32, d int)
	walk = func(i uint32, d int) {
		n := svc.Tree().Node(i)
		for k := n.FirstChild; k < n.FirstChild+n.ChildCount; k++ {
			if d == depth {
				out[svc.NodeValue(k)] = true
				continue
			}
			walk(k, d+1)
		}
	}
	walk(svc.Root(), 0)
	return out
}

// childValues is the values of scope number depth below the source's
// matched prefix, sorted.
func childValues(svc *shared.Service, src shared.Locality, depth int) []string {
	t := svc.Tree()
	n := t.Node(svc.Root())
	for _, sc := range svc.Scopes()[:depth] {
		for k := n.FirstChild; k < n.FirstChild+n.ChildCount; k++ {
			if svc.NodeValue(k) == src[sc] {
				n = t.Node(k)
				break
			}
		}
	}
	var out []string
	for k := n.FirstChild; k < n.FirstChild+n.ChildCount; k++ {
		out = append(out, svc.NodeValue(k))
	}
	slices.Sort(out)
	return out
}

// nearest is up to n of values closest to v by edit distance, closest
// first (ties by name).
func nearest(v string, values map[string]bool, n int) []string {
	list := make([]string, 0, len(values))
	for s := range values {
		list = append(list, s)
	}
	slices.SortFunc(list, func(a, b string) int {
		if da, db := topology.EditDistance(v, a), topology.EditDistance(v, b); da != db {
			return da - db
		}
		return strings.Compare(a, b)
	})
	return list[:min(n, len(list))]
}
