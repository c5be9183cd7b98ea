package kubernetes

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// DefaultRootNamespace is Istio's default config root namespace
// (meshConfig.rootNamespace): its DestinationRules apply mesh-wide.
const DefaultRootNamespace = "istio-system"

// decodeDestinationRule reads the fields the agent uses from a
// DestinationRule; its err says why it could not. An unknown field of a
// localityLbSetting is such an error: a setting the agent does not know is a
// setting it cannot honour.
func decodeDestinationRule(u *unstructured.Unstructured) *destinationRule {
	dr := &destinationRule{namespace: u.GetNamespace(), name: u.GetName(), uid: string(u.GetUID()), created: u.GetCreationTimestamp().Unix()}
	raw, err := json.Marshal(u.Object["spec"])
	if err == nil {
		err = json.Unmarshal(raw, &dr.spec)
	}
	dr.err = err
	return dr
}

// UnmarshalJSON decodes a localityLbSetting, refusing fields it does not know.
func (l *LocalityLBSetting) UnmarshalJSON(b []byte) error {
	type plain LocalityLBSetting
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	var p plain
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("localityLbSetting: %w", err)
	}
	*l = LocalityLBSetting(p)
	return nil
}

// hostFQDN is the rule's host as Istio resolves it (ResolveShortnameToFQDN,
// istio/istio pilot/pkg/model/config.go:209): a name without a dot is a
// Service of the rule's namespace; "*", wildcards and names with dots are
// taken as written.
func (dr *destinationRule) hostFQDN(domain string) string {
	h := dr.spec.Host
	if h == "" || h == "*" || strings.Contains(h, ".") {
		return h
	}
	return h + "." + dr.namespace + ".svc." + domain
}

// visibleInOwnNamespace: the rule is in its namespace's local index
// (setDestinationRules, pilot/pkg/model/push_context.go:2093).
func (dr *destinationRule) visibleInOwnNamespace() bool {
	e := dr.spec.ExportTo
	return len(e) == 0 || slices.Contains(e, "*") || slices.Contains(e, ".") || slices.Contains(e, dr.namespace)
}

// privateOnly: the rule is not exported beyond its namespace
// (push_context.go:2106-2113).
func (dr *destinationRule) privateOnly() bool {
	e := dr.spec.ExportTo
	return len(e) == 1 && (e[0] == "." || e[0] == dr.namespace)
}

// exportedTo: an exported rule is visible from ns
// (getExportedDestinationRuleFromNamespace, push_context.go:1327-1344).
func (dr *destinationRule) exportedTo(ns string) bool {
	e := dr.spec.ExportTo
	return len(e) == 0 || slices.Contains(e, "*") || slices.Contains(e, ns)
}

// selectRule returns the DestinationRules that apply to the Service
// namespace/name as they apply to a client in the Service's own namespace
// (PushContext.destinationRule, pilot/pkg/model/push_context.go:1259): the
// most specific host match among the namespace's own rules (only the
// private ones in the root namespace), else among the rules the Service's
// namespace exports to itself, else among the root namespace's exported
// rules. Rules with a workloadSelector apply to some clients only and are
// left out. The result is the rules of one host, oldest first
// (setDestinationRules sorts by creation time).
func selectRule(rules []*destinationRule, ns, name, domain, root string) []*destinationRule {
	fqdn := name + "." + ns + ".svc." + domain
	first := func(dr *destinationRule) bool { return dr.namespace == ns && dr.visibleInOwnNamespace() }
	if ns == root {
		first = func(dr *destinationRule) bool { return dr.namespace == root && dr.privateOnly() }
	}
	if m := mostSpecific(rules, fqdn, domain, first); len(m) > 0 {
		return m
	}
	for _, owner := range []string{ns, root} {
		m := mostSpecific(rules, fqdn, domain, func(dr *destinationRule) bool { return dr.namespace == owner && !dr.privateOnly() })
		if m = slices.DeleteFunc(m, func(dr *destinationRule) bool { return !dr.exportedTo(ns) }); len(m) > 0 {
			return m
		}
	}
	return nil
}

// mostSpecific transcribes MostSpecificHostMatch
// (pilot/pkg/model/config.go:276): an exact host first, else the matching
// wildcard host that host.MoreSpecific (pkg/config/host/names.go:39) ranks
// first: longest, then alphabetical.
func mostSpecific(rules []*destinationRule, fqdn, domain string, in func(*destinationRule) bool) []*destinationRule {
	var best string
	var out []*destinationRule
	for _, dr := range rules {
		h := dr.hostFQDN(domain)
		if dr.spec.WorkloadSelector != nil || !in(dr) || !hostMatches(h, fqdn) {
			continue
		}
		switch {
		case out == nil || moreSpecific(h, best):
			best, out = h, []*destinationRule{dr}
		case h == best:
			out = append(out, dr)
		}
	}
	slices.SortFunc(out, func(a, b *destinationRule) int {
		return cmp.Or(cmp.Compare(a.created, b.created), cmp.Compare(a.name, b.name))
	})
	return out
}

func hostMatches(h, fqdn string) bool {
	if strings.HasPrefix(h, "*") {
		return strings.HasSuffix(fqdn, h[1:])
	}
	return h == fqdn
}

func moreSpecific(a, b string) bool {
	aw, bw := strings.HasPrefix(a, "*"), strings.HasPrefix(b, "*")
	switch {
	case aw != bw:
		return bw
	case len(a) == len(b):
		return a < b
	}
	return len(a) > len(b)
}

// mergedPolicy is the traffic policy of rules of one host: the oldest rule's
// that has one (mergeDestinationRule, pilot/pkg/model/destination_rule.go:
// "only adopt the incoming top level policy when the merged rule does not
// have one yet").
func mergedPolicy(rules []*destinationRule) (*trafficPolicy, *destinationRule, error) {
	for _, dr := range rules {
		if dr.err != nil {
			return nil, dr, &ruleError{rule: dr, err: dr.err}
		}
	}
	for _, dr := range rules {
		if dr.spec.TrafficPolicy != nil {
			return dr.spec.TrafficPolicy, dr, nil
		}
	}
	return nil, nil, nil
}

// portPolicy is the policy for one port (GetPortLevelTrafficPolicy,
// pilot/pkg/networking/util/util.go:865): a port-level setting replaces the
// load balancer and outlier detection wholesale, unset fields included.
func (tp *trafficPolicy) portPolicy(port uint32) (*loadBalancer, *outlierDetection) {
	if tp == nil {
		return nil, nil
	}
	for _, p := range tp.PortLevelSettings {
		if p.Port != nil && p.Port.Number == port {
			return p.LoadBalancer, p.OutlierDetection
		}
	}
	return tp.LoadBalancer, tp.OutlierDetection
}

// setsLocality says the policy has a localityLbSetting, at the top or for
// a port.
func (tp *trafficPolicy) setsLocality() bool {
	if tp == nil {
		return false
	}
	if tp.LoadBalancer != nil && tp.LoadBalancer.LocalityLbSetting != nil {
		return true
	}
	for _, p := range tp.PortLevelSettings {
		if p.LoadBalancer != nil && p.LoadBalancer.LocalityLbSetting != nil {
			return true
		}
	}
	return false
}

// ruleError is a DestinationRule setting the tree cannot honour.
type ruleError struct {
	rule *destinationRule
	err  error
}

func (e *ruleError) Error() string {
	return fmt.Sprintf("destination rule %s/%s not honoured: %v", e.rule.namespace, e.rule.name, e.err)
}

func (e *ruleError) Unwrap() []error { return []error{ErrUnsupportedRule, e.err} }

// reference names the rule as the object of an Event.
func (dr *destinationRule) reference() *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion: DestinationRuleResource.GroupVersion().String(), Kind: "DestinationRule",
		Namespace: dr.namespace, Name: dr.name, UID: types.UID(dr.uid),
	}
}
