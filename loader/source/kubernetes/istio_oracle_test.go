package kubernetes

import (
	"slices"
	"sort"
	"strings"
)

// This file transcribes the Istio functions that define how a
// DestinationRule, a Service's traffic distribution and the mesh default
// become Envoy priorities, from istio/istio at
// 86c9f01fd735fb01d8192f5bcaf0d424afb7f14c, written from that source and not
// from the agent's code. It works on its own types (o*), on endpoint lists.

// oLB is the part of LocalityLoadBalancerSetting the oracle reads
// (istio/api networking/v1alpha3/destination_rule.proto).
type oLB struct {
	enabled          *bool
	failover         [][2]string // from, to
	failoverPriority []string
	distribute       bool
}

// oPolicy is a TrafficPolicy: load balancer (nil: unset), whether it has
// outlier detection and its minHealthPercent, and port-level settings.
type oPolicy struct {
	lbSet     bool // loadBalancer present
	lb        *oLB // its localityLbSetting
	od        bool
	minHealth int32
	ports     map[uint32]*oPolicy // port-level settings (no nested ports)
}

// oDR is a DestinationRule.
type oDR struct {
	ns, name string
	created  int64
	host     string
	exportTo []string
	selector bool
	policy   *oPolicy
}

// oGetTrafficDistribution transcribes GetTrafficDistribution,
// pilot/pkg/model/service.go:841-883. 0 Any, 1 PreferSameZone, 2 PreferSameNode.
func oGetTrafficDistribution(spec *string, svcAnn, nsAnn map[string]string) int {
	if spec != nil {
		switch *spec {
		case "PreferSameZone", "PreferClose":
			return 1
		case "PreferSameNode":
			return 2
		}
	}
	anno := "networking.istio.io/traffic-distribution"
	if v := strings.ToLower(svcAnn[anno]); v != "" {
		switch v {
		case "preferclose", "prefersamezone":
			return 1
		case "prefersamenode":
			return 2
		default:
			return 0
		}
	}
	if nsAnn != nil {
		if v := strings.ToLower(nsAnn[anno]); v != "" {
			switch v {
			case "preferclose", "prefersamezone":
				return 1
			case "prefersamenode":
				return 2
			default:
				return 0
			}
		}
	}
	return 0
}

// oResolve transcribes ResolveShortnameToFQDN, pilot/pkg/model/config.go:209-238.
func oResolve(h, ns string) string {
	if h == "*" || strings.Contains(h, ".") {
		return h
	}
	return h + "." + ns + ".svc.cluster.local"
}

// oMoreSpecific transcribes host.MoreSpecific, pkg/config/host/names.go:39-60.
func oMoreSpecific(a, b string) bool {
	ai, aj := strings.HasPrefix(a, "*"), strings.HasPrefix(b, "*")
	if ai && !aj {
		return false
	} else if !ai && aj {
		return true
	}
	if len(a) == len(b) {
		return a < b
	}
	return len(a) > len(b)
}

// oIndex is one consolidatedDestRules: host → rules merged (first traffic
// policy wins, destination_rule.go mergeDestinationRule).
type oIndex map[string][]*oDR

func (ix oIndex) merge(dr *oDR) {
	ix[oResolve(dr.host, dr.ns)] = append(ix[oResolve(dr.host, dr.ns)], dr)
}

// oMostSpecificHostMatch transcribes MostSpecificHostMatch and
// mostSpecificHostWildcardMatch, pilot/pkg/model/config.go:276-316, for a
// non-wildcard needle.
func oMostSpecificHostMatch(needle string, ix oIndex) ([]*oDR, bool) {
	if v, ok := ix[needle]; ok && !strings.HasPrefix(needle, "*") {
		return v, true
	}
	found, match := false, ""
	for h := range ix {
		if !strings.HasPrefix(h, "*") {
			continue
		}
		if strings.HasSuffix(needle, h[1:]) {
			if !found || oMoreSpecific(h, match) {
				match, found = h, true
			}
		}
	}
	return ix[match], found
}

// oDestinationRule transcribes setDestinationRules
// (pilot/pkg/model/push_context.go:2067-2131, with the default exportTo
// "*") and destinationRule (:1259-1325) for a proxy in proxyNs. Rules are
// sorted by creation time first (sortConfigBySelectorAndCreationTime).
// Rules with a workload selector are dropped: they apply to selected
// proxies only, which the oracle's proxy is not. Rules of one host are
// merged whatever their exportTo (Istio's EnableEnhancedDestinationRuleMerge
// keeps rules of different exportTo apart; not modelled), and the
// exportTo check of getExportedDestinationRuleFromNamespace (:1327-1344) is
// made per rule.
func oDestinationRule(rules []*oDR, proxyNs, svcHost, svcNs, root string) []*oDR {
	rules = slices.Clone(rules)
	sort.SliceStable(rules, func(i, j int) bool {
		if rules[i].created != rules[j].created {
			return rules[i].created < rules[j].created
		}
		return rules[i].name < rules[j].name
	})
	local, exported, rootLocal := map[string]oIndex{}, map[string]oIndex{}, oIndex{}
	for _, r := range rules {
		if r.selector {
			continue
		}
		e := r.exportTo
		if len(e) == 0 || slices.Contains(e, "*") || slices.Contains(e, ".") || slices.Contains(e, r.ns) {
			if local[r.ns] == nil {
				local[r.ns] = oIndex{}
			}
			local[r.ns].merge(r)
		}
		private := len(e) == 1 && (e[0] == "." || e[0] == r.ns)
		if !private {
			if exported[r.ns] == nil {
				exported[r.ns] = oIndex{}
			}
			exported[r.ns].merge(r)
		} else if r.ns == root {
			rootLocal.merge(r)
		}
	}
	if proxyNs != root {
		if drs, ok := oMostSpecificHostMatch(svcHost, local[proxyNs]); ok {
			return drs
		}
	} else if drs, ok := oMostSpecificHostMatch(svcHost, rootLocal); ok {
		return drs
	}
	visible := func(drs []*oDR) []*oDR {
		var out []*oDR
		for _, r := range drs {
			if len(r.exportTo) == 0 || slices.Contains(r.exportTo, "*") || slices.Contains(r.exportTo, proxyNs) {
				out = append(out, r)
			}
		}
		return out
	}
	if drs, ok := oMostSpecificHostMatch(svcHost, exported[svcNs]); ok {
		if out := visible(drs); len(out) > 0 {
			return out
		}
	}
	if drs, ok := oMostSpecificHostMatch(svcHost, exported[root]); ok {
		if out := visible(drs); len(out) > 0 {
			return out
		}
	}
	return nil
}

// oTopPolicy is the merged rule's top-level traffic policy: the first
// (oldest) rule's that has one (mergeDestinationRule,
// pilot/pkg/model/destination_rule.go:139-143).
func oTopPolicy(drs []*oDR) *oPolicy {
	for _, r := range drs {
		if r.policy != nil {
			return r.policy
		}
	}
	return nil
}

// oPortPolicy transcribes GetPortLevelTrafficPolicy,
// pilot/pkg/networking/util/util.go:865-890.
func oPortPolicy(p *oPolicy, port uint32) *oPolicy {
	if p == nil {
		return nil
	}
	if pp, ok := p.ports[port]; ok {
		return pp
	}
	return p
}

// oEffective transcribes GetEffectiveLbSetting,
// pilot/pkg/networking/core/loadbalancer/loadbalancer.go:250-309, without
// zone-aware settings. nil: no locality load balancing. td as
// oGetTrafficDistribution.
func oEffective(mesh *oLB, dr *oPolicy, td int) (setting *oLB, force bool) {
	if dr != nil && dr.lbSet && dr.lb != nil {
		if dr.lb.enabled != nil && !*dr.lb.enabled {
			return nil, false
		}
		return dr.lb, false
	}
	switch td {
	case 1:
		on := true
		return &oLB{enabled: &on, failoverPriority: []string{"topology.istio.io/network", "topology.kubernetes.io/region", "topology.kubernetes.io/zone"}}, true
	case 2:
		on := true
		return &oLB{enabled: &on, failoverPriority: []string{"topology.istio.io/network", "topology.kubernetes.io/region",
			"topology.kubernetes.io/zone", "topology.istio.io/subzone", "kubernetes.io/hostname"}}, true
	}
	if mesh != nil {
		if mesh.enabled != nil && !*mesh.enabled {
			return nil, false
		}
		return mesh, false
	}
	return nil, false
}

// oEndpoint is an Istio endpoint: its locality and labels (pod labels plus
// AugmentLabels' topology labels).
type oEndpoint struct {
	region, zone, subzone string
	labels                map[string]string
}

// oPriorities transcribes ApplyLocalityLoadBalancer
// (loadbalancer.go:384-415), applyFailoverPriorities (:545-585),
// applyFailoverPriorityPerLocality (:605-664), priorityLabelOverrides
// (:588-601), applyLocalityFailover (:480-534) and LbPriority
// (pilot/pkg/networking/util/util.go:344-355): every endpoint's Envoy
// priority for a proxy, 0 highest, without gaps. enableFailover is
// ApplyToCluster's "l.Force || c.OutlierDetection != nil" (:137). A nil
// setting (no locality load balancing) leaves every endpoint at 0.
func oPriorities(set *oLB, enableFailover bool, proxy oEndpoint, eps []oEndpoint) []int {
	prio := make([]int, len(eps))
	if set == nil || set.distribute || !enableFailover {
		return prio
	}
	if len(set.failoverPriority) > 0 {
		prio = oFailoverPriorities(set.failoverPriority, proxy.labels, eps)
		if len(set.failover) == 0 {
			return prio
		}
	}
	return oLocalityFailover(prio, set.failover, proxy, eps)
}

func oFailoverPriorities(fp []string, proxyLabels map[string]string, eps []oEndpoint) []int {
	prio := make([]int, len(eps))
	if len(proxyLabels) == 0 {
		return prio
	}
	lowest := len(fp)
	includesNetwork := fp[0] == "topology.istio.io/network"
	var names []string
	overrides := map[string]string{}
	for _, l := range fp {
		parts := strings.Split(l, "=")
		names = append(names, parts[0])
		if len(parts) == 2 {
			overrides[parts[0]] = parts[1]
		}
	}
	for i, ep := range eps {
		p, adjust := 0, 0
		for j, name := range names {
			v, ok := overrides[name]
			if !ok {
				v = proxyLabels[name]
			}
			if v != ep.labels[name] {
				if j == 0 && includesNetwork {
					adjust = len(fp)
					continue
				}
				p = lowest - j
				break
			}
		}
		prio[i] = p + adjust
	}
	return oCompact(prio)
}

func oLocalityFailover(prio []int, failover [][2]string, proxy oEndpoint, eps []oEndpoint) []int {
	out := make([]int, len(eps))
	for i, ep := range eps {
		p := 3
		switch {
		case proxy.region == ep.region && proxy.zone == ep.zone && proxy.subzone == ep.subzone:
			p = 0
		case proxy.region == ep.region && proxy.zone == ep.zone:
			p = 1
		case proxy.region == ep.region:
			p = 2
		}
		if p == 3 {
			for _, f := range failover {
				if f[0] == proxy.region {
					if ep.region != f[1] {
						p = 4
					}
					break
				}
			}
		}
		out[i] = prio[i]*5 + p
	}
	return oCompact(out)
}

// oCompact renumbers the distinct priorities 0..N in order ("Priorities
// should range from 0 (highest) to N (lowest) without skipping").
func oCompact(prio []int) []int {
	distinct := slices.Compact(slices.Sorted(slices.Values(prio)))
	out := make([]int, len(prio))
	for i, p := range prio {
		out[i] = slices.Index(distinct, p)
	}
	return out
}

// oPanicThreshold transcribes applyOutlierDetection's panic threshold,
// pilot/pkg/networking/core/cluster_traffic_policy.go:546-558, with
// ForcesSupportUnhealthyEndpoints (pilot/pkg/model/service.go:176-190)
// true when the Service has a traffic distribution. -1: not set (Envoy's
// default 50).
func oPanicThreshold(p *oPolicy, td int) float64 {
	if p == nil || !p.od {
		return -1
	}
	mhp := p.minHealth
	if mhp >= 0 {
		if td != 0 {
			mhp = 0
		}
		return float64(mhp)
	}
	return -1
}
