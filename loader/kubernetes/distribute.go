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
//
// It has the shape of shared.DistributeSpec, which the tree is getting in
// parallel. Once it exists: distributeRule becomes shared.DistributeSpec,
// treeInput.header assigns ServiceSpec.Distribute from settings.distribute,
// and distributeSettings returns nil instead of errDistributeUnsupported.
type distributeRule struct {
	From string
	To   map[string]uint32
}

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
// failover rules (Istio applies distribute instead of failover,
// loadbalancer.go:397-402). Until the tree has the field the error says so.
func distributeSettings(base settings, in []localityDistribute) (settings, error) {
	rules, err := distributeRules(in)
	if err != nil {
		return base, err
	}
	out := base
	out.scopes, out.mode, out.distribute = localityScopes, shared.ModeFailover.String(), rules
	out.failover, out.spillover, out.localityLB = nil, nil, nil
	return out, errDistributeUnsupported
}
