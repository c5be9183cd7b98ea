package kubernetes

import (
	"cmp"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/loctree/loctree/shared"
)

// candidate is one endpoint address of a tree service with its conditions.
type candidate struct {
	addr        netip.AddrPort
	ready       bool // ready and not terminating
	serving     bool // serving while terminating
	nodeName    string
	zone        string
	terminating bool
}

// endpoints are the endpoints of port p of the given family, sorted by address.
func (in *treeInput) endpoints(p *corev1.ServicePort, typ discoveryv1.AddressType, nodes map[string]struct{}) []shared.EndpointSpec {
	cands := in.candidates(p, typ)
	anyReady := slices.ContainsFunc(cands, func(c candidate) bool { return c.ready })
	locs := map[[2]string]shared.Locality{} // endpoints on one node in one zone share a Locality
	out := make([]shared.EndpointSpec, 0, len(cands))
	for i := range cands {
		c := &cands[i]
		live := c.ready || (!anyReady && c.terminating && c.serving)
		if in.set.onlyReady && !live {
			continue
		}
		at := [2]string{c.nodeName, c.zone}
		loc, ok := locs[at]
		if !ok {
			loc = in.locality(c.nodeName, c.zone, nodes)
			locs[at] = loc
		}
		out = append(out, shared.EndpointSpec{
			Address:  c.addr.String(),
			Locality: loc,
			Healthy:  healthFlag(live),
		})
	}
	return out
}

// locality is the locality of an endpoint on nodeName whose slice says zone.
func (in *treeInput) locality(nodeName, zone string, nodes map[string]struct{}) shared.Locality {
	var labels map[string]string
	if nodeName != "" {
		nodes[nodeName] = struct{}{}
		labels = in.labels(nodeName)
	}
	return endpointLocality(in.set.scopes, nodeName, zone, labels, in.clusterID)
}

// The health flags every EndpointSpec points to (read-only).
var healthyFlag, unhealthyFlag = true, false

func healthFlag(h bool) *bool {
	if h {
		return &healthyFlag
	}
	return &unhealthyFlag
}

// candidates collects the endpoints of all slices for port p, deduplicated by
// address (an endpoint may sit in two slices while it moves; ready wins),
// sorted by address.
func (in *treeInput) candidates(p *corev1.ServicePort, typ discoveryv1.AddressType) []candidate {
	n := 0
	for _, sl := range in.slices {
		n += len(sl.Endpoints)
	}
	all := make([]candidate, 0, n)
	at := make(map[netip.AddrPort]int, n)
	for _, sl := range in.slices {
		port, ok := slicePort(sl, p, typ)
		if !ok {
			continue
		}
		for i := range sl.Endpoints {
			c, ok := newCandidate(&sl.Endpoints[i], port)
			if !ok {
				continue
			}
			if j, dup := at[c.addr]; dup {
				if rank(c) > rank(all[j]) {
					all[j] = c
				}
				continue
			}
			at[c.addr] = len(all)
			all = append(all, c)
		}
	}
	return sortedByAddr(all)
}

// sortedByAddr sorts through an index (moving the structs once, not per swap).
func sortedByAddr(cs []candidate) []candidate {
	order := make([]int32, len(cs))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return cs[a].addr.Compare(cs[b].addr) })
	out := make([]candidate, len(cs))
	for i, j := range order {
		out[i] = cs[j]
	}
	return out
}

func rank(c candidate) int {
	switch {
	case c.ready:
		return 2
	case c.serving:
		return 1
	}
	return 0
}

// slicePort is the target port a slice of the right family gives service port p.
func slicePort(sl *discoveryv1.EndpointSlice, p *corev1.ServicePort, typ discoveryv1.AddressType) (uint16, bool) {
	if sl.AddressType != typ {
		return 0, false
	}
	for _, sp := range sl.Ports {
		name := ""
		if sp.Name != nil {
			name = *sp.Name
		}
		proto := corev1.ProtocolTCP
		if sp.Protocol != nil {
			proto = *sp.Protocol
		}
		if name == p.Name && proto == protocol(p.Protocol) && sp.Port != nil && *sp.Port > 0 && *sp.Port < 1<<16 {
			return uint16(*sp.Port), true
		}
	}
	return 0, false
}

// newCandidate reads an endpoint's first address (the only one consumers use)
// and its conditions; nil ready means ready, nil serving means ready.
func newCandidate(ep *discoveryv1.Endpoint, port uint16) (candidate, bool) {
	if len(ep.Addresses) == 0 {
		return candidate{}, false
	}
	a, err := netip.ParseAddr(ep.Addresses[0])
	if err != nil {
		return candidate{}, false
	}
	cond := ep.Conditions
	ready := cond.Ready == nil || *cond.Ready
	term := cond.Terminating != nil && *cond.Terminating
	serving := cmp.Or(cond.Serving, cond.Ready)
	c := candidate{
		addr:        netip.AddrPortFrom(a.Unmap(), port),
		ready:       ready && !term,
		serving:     serving == nil || *serving,
		terminating: term,
	}
	if ep.NodeName != nil {
		c.nodeName = *ep.NodeName
	}
	if ep.Zone != nil {
		c.zone = *ep.Zone
	}
	return c, true
}
