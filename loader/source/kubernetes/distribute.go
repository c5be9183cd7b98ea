package kubernetes

import (
	"fmt"
	"maps"
	"strings"

	"github.com/loctree/loctree/shared"
)

// distributeRule is one localityLbSetting.distribute rule: sources in
// locality From send To[locality] percent of their traffic to that
// locality. Localities are region/zone/subzone, a trailing "*" matches
// anything (LocalityMatch, istio/istio pilot/pkg/networking/util/util.go:332).
type distributeRule = shared.DistributeSpec

// distributeRules checks distribute rules as Istio's validation does
// (ValidateLocalityLbSetting, pkg/config/validation/agent/validation.go:
// 531-566 and validateLocalities :647): weights from 1 to 100 summing to
// 100 per rule, at most one "*" and only at the end, no empty segment.
func distributeRules(in []localityDistribute) ([]distributeRule, error) {
	out := make([]distributeRule, 0, len(in))
	for _, d := range in {
		if err := checkLocality(d.From); err != nil {
			return nil, fmt.Errorf("localityLbSetting.distribute from %q: %w", d.From, err)
		}
		var total uint32
		for loc, w := range d.To {
			if err := checkLocality(loc); err != nil {
				return nil, fmt.Errorf("localityLbSetting.distribute from %q to %q: %w", d.From, loc, err)
			}
			if w < 1 || w > 100 {
				return nil, fmt.Errorf("localityLbSetting.distribute from %q to %q: weight %d (want 1 to 100)", d.From, loc, w)
			}
			total += w
		}
		if total != 100 {
			return nil, fmt.Errorf("localityLbSetting.distribute from %q: weights add up to %d (want 100)", d.From, total)
		}
		out = append(out, distributeRule{From: d.From, To: maps.Clone(d.To)})
	}
	return out, nil
}

func checkLocality(l string) error {
	if n := strings.Count(l, "*"); n > 1 || (n == 1 && !strings.HasSuffix(l, "*")) {
		return fmt.Errorf("at most one \"*\", at the end")
	}
	parts := strings.Split(l, "/")
	if len(parts) > 3 {
		return fmt.Errorf("want region, region/zone or region/zone/subzone")
	}
	for _, p := range parts {
		if p == "" {
			return fmt.Errorf("empty region, zone or subzone")
		}
	}
	return nil
}

// distributeSettings are the settings of a localityLbSetting with
// distribute: the locality scopes and the rules, in failover mode without
// failover rules (Istio applies distribute instead of failover, with or
// without outlier detection, loadbalancer.go:397-402), and Envoy's priority
// load over the one priority Istio leaves (its panic threshold from the
// outlier detection as for failover, else Envoy's default). Rules Istio
// accepts but the tree cannot express (overlapping targets, more than
// shared's targets per rule) are refused here, with the tree's reason, so
// one DestinationRule never stops the whole tree from building.
func distributeSettings(base settings, in []localityDistribute, od *outlierDetection, td trafficDist) (settings, error) {
	rules, err := distributeRules(in)
	if err != nil {
		return base, err
	}
	out := base
	out.scopes, out.mode, out.distribute = localityScopes, shared.ModeFailover.String(), rules
	out.failover, out.localityLB = nil, nil
	out.spillover = &shared.SpilloverSpec{}
	if od != nil {
		out.spillover.PanicThreshold = panicThreshold(od, td)
	}
	probe := shared.ServiceSpec{Name: "probe", Scopes: out.scopes, Spillover: out.spillover, Distribute: rules}
	if _, err := shared.Build(&shared.Topology{Services: []shared.ServiceSpec{probe}}, shared.BuildOptions{}); err != nil {
		return base, fmt.Errorf("localityLbSetting.distribute: %w", err)
	}
	return out, nil
}
