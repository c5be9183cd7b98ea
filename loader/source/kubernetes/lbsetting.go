package kubernetes

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/loctree/loctree/shared"
)

// Istio's topology labels as failoverPriority names them, and the tree scope
// each is (Istio adds them to every endpoint's labels: AugmentLabels,
// istio/istio pilot/pkg/serviceregistry/util/label/label.go:37).
var priorityLabelScopes = map[string]string{
	LabelNetwork:                ScopeNetwork,
	LabelRegion:                 ScopeRegion,
	LabelZone:                   ScopeZone,
	LabelSubzone:                ScopeSubzone,
	"topology.istio.io/cluster": ScopeCluster,
	"kubernetes.io/hostname":    ScopeNode,
}

// localityScopes are applyLocalityFailover's priorities: region, zone and
// subzone (LbPriority, pilot/pkg/networking/util/util.go:344).
var localityScopes = []string{ScopeRegion, ScopeZone, ScopeSubzone}

// ruleSettings applies a DestinationRule's load balancer and outlier
// detection for one port on top of the Service's settings base, as Istio's
// GetEffectiveLbSetting (pilot/pkg/networking/core/loadbalancer/
// loadbalancer.go:250) and ApplyLocalityLoadBalancer (:384) do: the rule's
// localityLbSetting over the Service's traffic distribution over the mesh
// default. The error names what the tree cannot honour.
func ruleSettings(base settings, lb *loadBalancer, od *outlierDetection, td trafficDist, mesh *LocalityLBSetting) (settings, error) {
	out, err := lbSettings(base, lb, od, td, mesh)
	out.onlyReady = od != nil && !sendsUnready(od, td)
	return out, err
}

func lbSettings(base settings, lb *loadBalancer, od *outlierDetection, td trafficDist, mesh *LocalityLBSetting) (settings, error) {
	var set *LocalityLBSetting
	switch {
	case lb != nil && lb.ZoneAwareLbSetting != nil:
		return base, fmt.Errorf("loadBalancer.zoneAwareLbSetting: Envoy's zone-aware routing is not in the tree; use localityLbSetting")
	case lb != nil && lb.LocalityLbSetting != nil:
		set = lb.LocalityLbSetting
	case td != tdAny:
		return base, nil // the Service's trafficDistribution, as ambient maps it
	default:
		set = mesh
	}
	if set == nil || (set.Enabled != nil && !*set.Enabled) {
		return localityOff(base), nil
	}
	if len(set.Distribute) > 0 { // applied without outlier detection (loadbalancer.go:398)
		return distributeSettings(base, set.Distribute, od, td)
	}
	if od == nil { // Istio applies failover only with outlier detection (loadbalancer.go:137)
		return localityOff(base), nil
	}
	return failoverSettings(base, set, od, td)
}

// localityOff is one priority holding every endpoint.
func localityOff(base settings) settings {
	off := false
	base.scopes, base.localityLB, base.failover, base.spillover = nil, &off, nil, nil
	base.mode = shared.ModeFailover.String()
	return base
}

// failoverSettings are applyFailoverPriorities or applyLocalityFailover's
// priorities, with Envoy's priority load.
func failoverSettings(base settings, set *LocalityLBSetting, od *outlierDetection, td trafficDist) (settings, error) {
	out := base
	out.mode, out.localityLB = shared.ModeFailover.String(), nil
	out.spillover = &shared.SpilloverSpec{PanicThreshold: panicThreshold(od, td)}
	if len(set.FailoverPriority) > 0 {
		scopes, err := priorityScopes(set.FailoverPriority)
		if err != nil || len(set.Failover) == 0 {
			out.scopes, out.failover = scopes, nil
			return out, err
		}
		return failoverWithPriority(out, base, scopes, set.Failover)
	}
	rules, err := failoverRules(set.Failover)
	out.scopes, out.failover = localityScopes, rules
	return out, err
}

// failoverWithPriority is failover rules together with a failoverPriority
// of up to shared.MaxScopesBeforeRegion labels: Istio ranks by the labels
// and then by region, zone and subzone within each rank, failoverPriority
// rank × 5 + LbPriority (applyLocalityFailover over
// applyFailoverPriorities, loadbalancer.go at b6787c12): the scopes
// [labels…, region, zone, subzone] with the rules, whose other values the
// tree ranks from its copies by class (docs/FORMAT.md "Copies by the
// first scope", "Classes before the locality"). More labels, a label with
// a value, or a locality label are not held.
func failoverWithPriority(out, base settings, scopes []string, rules []localityFailover) (settings, error) {
	if held := shared.MaxScopesBeforeRegion(scopes[0] == "network"); len(scopes) > held {
		return base, fmt.Errorf("localityLbSetting: failover together with a failoverPriority of %d labels ranks each rank of every label again by region, zone and subzone; the tree holds that for up to %d labels (%d with the network first)", len(scopes), shared.MaxScopesBeforeRegion(false), shared.MaxScopesBeforeRegion(true))
	}
	for _, sc := range scopes {
		switch {
		case strings.Contains(sc, "="):
			return base, fmt.Errorf("localityLbSetting: failover together with failoverPriority %q: a label with a value before region is not held with failover rules; drop the value or the failover rules", sc)
		case slices.Contains(localityScopes, sc):
			return base, fmt.Errorf("localityLbSetting: failover together with failoverPriority %q: the tree ranks region, zone and subzone by the failover rules; drop the failoverPriority", sc)
		}
	}
	fo, err := failoverRules(rules)
	out.scopes, out.failover = append(scopes, localityScopes...), fo
	return out, err
}

// panicThreshold is Envoy's healthy_panic_threshold as Istio sets it from
// outlierDetection.minHealthPercent (applyOutlierDetection,
// pilot/pkg/networking/core/cluster_traffic_policy.go:550): a value ≥ 0 is
// the threshold (0 when the Service forces unhealthy endpoints, as a
// trafficDistribution does); Envoy reads at most 100.
func panicThreshold(od *outlierDetection, td trafficDist) *uint32 {
	var mhp int32 // proto3: unset is 0
	if od.MinHealthPercent != nil {
		mhp = *od.MinHealthPercent
	}
	if mhp < 0 {
		return nil // not set: Envoy's default
	}
	if td != tdAny {
		mhp = 0
	}
	v := uint32(min(mhp, 100))
	return &v
}

// sendsUnready says Istio puts unready endpoints in EDS, where they count
// in their priority's health (supportsUnhealthyEndpoints,
// pilot/pkg/xds/endpoints/endpoint_builder.go:232, with
// PILOT_AUTO_SEND_UNHEALTHY_ENDPOINTS on, its default): always for a
// Service with a traffic distribution, else unless outlier detection sets
// minHealthPercent > 0.
func sendsUnready(od *outlierDetection, td trafficDist) bool {
	return td != tdAny || od.MinHealthPercent == nil || *od.MinHealthPercent <= 0
}

// priorityScopes maps failoverPriority labels to tree scopes: Istio's
// topology labels to the fixed scopes, any other label to a node label key;
// "label=value" keeps its value.
func priorityScopes(labels []string) ([]string, error) {
	if len(labels) > shared.MaxLevels {
		return nil, fmt.Errorf("localityLbSetting.failoverPriority: %d labels (the tree has at most %d levels)", len(labels), shared.MaxLevels)
	}
	out := make([]string, 0, len(labels))
	seen := map[string]bool{}
	for _, l := range labels {
		sc, err := priorityScope(l)
		if err != nil {
			return nil, fmt.Errorf("localityLbSetting.failoverPriority: %w", err)
		}
		if seen[sc] {
			return nil, fmt.Errorf("localityLbSetting.failoverPriority: %q repeats a label", l)
		}
		seen[sc] = true
		out = append(out, sc)
	}
	return out, nil
}

func priorityScope(l string) (string, error) {
	key, value, override := strings.Cut(l, "=")
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return "", fmt.Errorf("%q: %q is not a label key: %s", l, key, strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(value); override && len(errs) > 0 {
		return "", fmt.Errorf("%q: want label=value with a label value: %s", l, strings.Join(errs, "; "))
	}
	if sc, ok := priorityLabelScopes[key]; ok {
		key = sc
	}
	if override {
		return key + "=" + value, nil
	}
	return key, nil
}

// failoverRules are the failover rules the tree takes: the first rule of a
// from-region wins, as applyLocalityFailover's loop breaks at it
// (loadbalancer.go:498-504). A rule Istio's validation refuses
// (ValidateLocalityLbSetting, pkg/config/validation/agent/validation.go:531)
// is an error.
func failoverRules(rules []localityFailover) ([]shared.FailoverSpec, error) {
	var out []shared.FailoverSpec
	seen := map[string]bool{}
	for _, r := range rules {
		switch {
		case r.From == "" || r.To == "":
			return nil, fmt.Errorf("localityLbSetting.failover from %q to %q: both regions are required", r.From, r.To)
		}
		if err := shared.CheckFailoverRule(shared.FailoverSpec{From: r.From, To: r.To}); err != nil {
			return nil, fmt.Errorf("localityLbSetting.failover from %q to %q: %w", r.From, r.To, err)
		}
		if !seen[r.From] {
			seen[r.From] = true
			out = append(out, shared.FailoverSpec{From: r.From, To: r.To})
		}
	}
	if len(out) > shared.MaxFailover {
		return nil, fmt.Errorf("localityLbSetting.failover: %d rules (the tree takes %d)", len(out), shared.MaxFailover)
	}
	return out, nil
}
