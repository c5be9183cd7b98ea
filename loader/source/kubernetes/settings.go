package kubernetes

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/loctree/loctree/shared"
)

// Annotations a Service may carry.
const (
	AnnotationEnabled = "loctree.io/enabled"
	AnnotationScopes  = "loctree.io/scopes"
	AnnotationMode    = "loctree.io/mode"
	AnnotationPolicy  = "loctree.io/policy"
)

// Scope keys with a fixed meaning; any other scope is a node label key.
const (
	ScopeNetwork = "network"
	ScopeCluster = "cluster"
	ScopeRegion  = "region"
	ScopeZone    = "zone"
	ScopeSubzone = "subzone"
	ScopeNode    = "node"
)

// trafficDistribution values of spec.trafficDistribution.
const (
	preferClose    = "PreferClose"
	preferSameZone = "PreferSameZone"
	preferSameNode = "PreferSameNode"
)

var (
	// closeScopes are Istio ambient's for PreferClose and PreferSameZone
	// (preferSameZoneLoadBalancer, pilot/pkg/serviceregistry/ambient/
	// services.go:704 at istio/istio 86c9f01fd735), sameNodeScopes for
	// PreferSameNode (:722), localScopes for internalTrafficPolicy: Local.
	closeScopes = []string{ScopeNetwork, ScopeRegion, ScopeZone}
	// optInScopes are those of a Service loctree.io/enabled opts in with no
	// traffic distribution: the locality levels of an Envoy sidecar
	// (region, zone, subzone) behind the network.
	optInScopes    = []string{ScopeNetwork, ScopeRegion, ScopeZone, ScopeSubzone}
	sameNodeScopes = []string{ScopeNetwork, ScopeRegion, ScopeZone, ScopeSubzone, ScopeNode}
	localScopes    = []string{ScopeNode}
)

// settings is how one port of a Service is turned into tree services.
type settings struct {
	scopes     []string
	mode       string
	policy     string
	health     string
	spillover  *shared.SpilloverSpec
	failover   []shared.FailoverSpec
	localityLB *bool
	distribute []distributeRule // not in the tree yet: see distributeRule
	// onlyReady leaves unready endpoints out, as Istio leaves them out of
	// EDS when outlier detection sets minHealthPercent > 0.
	onlyReady bool
	// affinity is the session affinity timeout in seconds, 0 for none.
	affinity uint32
}

func (s settings) equal(o settings) bool { return reflect.DeepEqual(s, o) }

// svcSettings are a Service's settings: base for every port, ports for the
// ports a DestinationRule applies to.
type svcSettings struct {
	base  settings
	ports map[int32]settings
}

// forPort is the settings of a service port.
func (s svcSettings) forPort(port int32) settings {
	if p, ok := s.ports[port]; ok {
		return p
	}
	return s.base
}

// policyInput is what decides a Service's settings besides the Service.
type policyInput struct {
	nsAnnotations map[string]string  // its Namespace's annotations
	rules         []*destinationRule // the DestinationRules of its host, oldest first (selectRule)
	mesh          *LocalityLBSetting // the mesh default (meshConfig.localityLbSetting)
}

// serviceSettings says whether svc is managed and how. The error wraps
// ErrBadAnnotation and names the annotation and what it accepts, or is a
// *ruleError naming the DestinationRule setting the tree cannot honour.
func serviceSettings(svc *corev1.Service, in policyInput) (svcSettings, bool, error) {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return svcSettings{}, false, nil
	}
	td, err := trafficDistribution(svc, in.nsAnnotations)
	if err != nil {
		return svcSettings{}, false, err
	}
	tp, dr, err := mergedPolicy(in.rules)
	if err != nil {
		return svcSettings{}, false, err
	}
	managed, err := isManaged(svc, td, tp.setsLocality())
	if err != nil || !managed {
		return svcSettings{}, false, err
	}
	out := svcSettings{base: defaultSettings(svc, td)}
	if len(in.rules) > 0 && !nodeLocal(svc) { // a rule applies, even without a traffic policy
		if dr == nil {
			dr = in.rules[0]
		}
		if out.ports, err = portSettings(svc, out.base, tp, td, in.mesh); err != nil {
			return svcSettings{}, false, &ruleError{rule: dr, err: err}
		}
	}
	if err := out.annotate(svc.Annotations); err != nil {
		return svcSettings{}, false, err
	}
	if err := out.sessionAffinity(svc); err != nil {
		return svcSettings{}, false, err
	}
	return out, true, nil
}

// portSettings applies the rule's policy to every port of svc.
func portSettings(svc *corev1.Service, base settings, tp *trafficPolicy, td trafficDist, mesh *LocalityLBSetting) (map[int32]settings, error) {
	out := make(map[int32]settings, len(svc.Spec.Ports))
	for _, p := range svc.Spec.Ports {
		lb, od := tp.portPolicy(uint32(p.Port))
		set, err := ruleSettings(base, lb, od, td, mesh)
		if err != nil {
			return nil, fmt.Errorf("port %d: %w", p.Port, err)
		}
		out[p.Port] = set
	}
	return out, nil
}

// annotate applies loctree's own annotations, which override what the
// Service's fields and its DestinationRule say.
func (s *svcSettings) annotate(ann map[string]string) error {
	if err := applyAnnotations(&s.base, ann); err != nil {
		return err
	}
	for port, set := range s.ports {
		if err := applyAnnotations(&set, ann); err != nil {
			return err
		}
		if err := set.treeConflict(); err != nil {
			return fmt.Errorf("%w: port %d: %w", ErrBadAnnotation, port, err)
		}
		s.ports[port] = set
	}
	return nil
}

// treeConflict is why the tree would refuse settings loctree's annotations
// made out of a DestinationRule's.
func (s settings) treeConflict() error {
	switch {
	case s.spillover != nil && s.mode != shared.ModeFailover.String():
		return fmt.Errorf("%s: %s: the DestinationRule's failover needs mode failover", AnnotationMode, s.mode)
	case len(s.failover) > 0 && !slices.Contains(s.scopes, ScopeRegion):
		return fmt.Errorf("%s: %v: the DestinationRule's failover needs the scope region", AnnotationScopes, s.scopes)
	}
	return nil
}

func nodeLocal(svc *corev1.Service) bool {
	p := svc.Spec.InternalTrafficPolicy
	return p != nil && *p == corev1.ServiceInternalTrafficPolicyLocal
}

// isManaged: loctree.io/enabled decides; without it, a traffic distribution
// or a DestinationRule with a localityLbSetting makes the Service managed.
func isManaged(svc *corev1.Service, td trafficDist, ruleLocality bool) (bool, error) {
	v, ok := svc.Annotations[AnnotationEnabled]
	switch {
	case !ok:
		return td != tdAny || ruleLocality, nil
	case v == "true":
		return true, nil
	case v == "false":
		return false, nil
	}
	return false, fmt.Errorf("%w: %s: %q is neither \"true\" nor \"false\"", ErrBadAnnotation, AnnotationEnabled, v)
}

// defaultSettings follows Istio ambient's mapping of the Service's traffic
// fields (td is its traffic distribution, trafficDistribution).
func defaultSettings(svc *corev1.Service, td trafficDist) settings {
	s := settings{scopes: closeScopes, mode: shared.ModeFailover.String()}
	switch td {
	case tdAny:
		s.scopes = optInScopes
	case tdSameNode:
		s.scopes = sameNodeScopes
	}
	if nodeLocal(svc) {
		s.scopes, s.mode = localScopes, shared.ModeStrict.String()
	}
	if svc.Spec.PublishNotReadyAddresses {
		s.health = shared.HealthAllowAll.String()
	} else {
		s.health = shared.HealthOnlyHealthy.String()
	}
	return s
}

func applyAnnotations(s *settings, ann map[string]string) error {
	if v, ok := ann[AnnotationScopes]; ok {
		scopes, err := parseScopes(v)
		if err != nil {
			return err
		}
		s.scopes, s.localityLB = scopes, nil
	}
	if v, ok := ann[AnnotationMode]; ok {
		if _, err := shared.ParseMode(v); err != nil || v == "" {
			return fmt.Errorf("%w: %s: %q: want failover or strict", ErrBadAnnotation, AnnotationMode, v)
		}
		s.mode = v
	}
	if v, ok := ann[AnnotationPolicy]; ok {
		if _, err := shared.ParsePolicy(v); err != nil || v == "" {
			return fmt.Errorf("%w: %s: %q: want random, weighted, round_robin, least_request, least_connections or consistent_hash", ErrBadAnnotation, AnnotationPolicy, v)
		}
		s.policy = v
	}
	return nil
}

// parseScopes parses a comma list of 1..8 distinct scopes: the fixed names or
// prefixed node label keys (a bare unknown word is most likely a typo).
func parseScopes(v string) ([]string, error) {
	parts := strings.Split(v, ",")
	if len(parts) > shared.MaxLevels {
		return nil, fmt.Errorf("%w: %s: %d scopes (want 1 to %d)", ErrBadAnnotation, AnnotationScopes, len(parts), shared.MaxLevels)
	}
	scopes := make([]string, 0, len(parts))
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if err := checkScope(p); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrBadAnnotation, AnnotationScopes, err)
		}
		if slices.Contains(scopes, p) {
			return nil, fmt.Errorf("%w: %s: scope %q repeated", ErrBadAnnotation, AnnotationScopes, p)
		}
		scopes = append(scopes, p)
	}
	return scopes, nil
}

func checkScope(p string) error {
	switch p {
	case ScopeNetwork, ScopeCluster, ScopeRegion, ScopeZone, ScopeSubzone, ScopeNode:
		return nil
	case "":
		return fmt.Errorf("empty scope")
	}
	if !strings.Contains(p, "/") {
		return fmt.Errorf("unknown scope %q: want network, cluster, region, zone, subzone, node or a prefixed node label key", p)
	}
	if errs := validation.IsQualifiedName(p); len(errs) > 0 {
		return fmt.Errorf("scope %q is not a label key: %s", p, strings.Join(errs, "; "))
	}
	return nil
}

// sessionAffinity applies the Service's session affinity to every port's
// settings, after loctree's annotations and the DestinationRule.
func (s *svcSettings) sessionAffinity(svc *corev1.Service) error {
	if err := applySessionAffinity(&s.base, svc); err != nil {
		return err
	}
	for port, set := range s.ports {
		if err := applySessionAffinity(&set, svc); err != nil {
			return err
		}
		s.ports[port] = set
	}
	return nil
}

// applySessionAffinity maps spec.sessionAffinity: ClientIP onto
// consistent_hash, which the kernel keys by the client pod's netns, with
// the Service's timeout: Kubernetes' default when it has none
// (SetDefaults_Service), its bounds as validateAffinityTimeout.
func applySessionAffinity(s *settings, svc *corev1.Service) error {
	switch svc.Spec.SessionAffinity {
	case "", corev1.ServiceAffinityNone:
		return nil
	case corev1.ServiceAffinityClientIP:
	default:
		return fmt.Errorf("%w: sessionAffinity %q: want None or ClientIP", ErrBadAnnotation, svc.Spec.SessionAffinity)
	}
	if s.policy != "" && s.policy != shared.PolicyConsistentHash.String() {
		return fmt.Errorf("%w: sessionAffinity ClientIP needs policy consistent_hash, not %s: remove %s or the session affinity", ErrBadAnnotation, s.policy, AnnotationPolicy)
	}
	timeout := int64(shared.DefaultAffinityTimeout)
	if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
		timeout = int64(*c.ClientIP.TimeoutSeconds)
	}
	if timeout < 1 || timeout > shared.MaxAffinityTimeout {
		return fmt.Errorf("%w: sessionAffinityConfig.clientIP.timeoutSeconds %d: want 1 to %d", ErrBadAnnotation, timeout, shared.MaxAffinityTimeout)
	}
	s.policy, s.affinity = shared.PolicyConsistentHash.String(), uint32(timeout)
	return nil
}
