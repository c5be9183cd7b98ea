package kubernetes

import (
	"fmt"
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
	closeScopes    = []string{ScopeNetwork, ScopeRegion, ScopeZone, ScopeSubzone}
	sameNodeScopes = []string{ScopeNetwork, ScopeRegion, ScopeZone, ScopeSubzone, ScopeNode}
	localScopes    = []string{ScopeNode}
)

// settings is how one Service is turned into tree services.
type settings struct {
	scopes []string
	mode   string
	policy string
	health string
	// affinity is the session affinity timeout in seconds, 0 for none.
	affinity uint32
}

func (s settings) equal(o settings) bool {
	return slices.Equal(s.scopes, o.scopes) && s.mode == o.mode && s.policy == o.policy && s.health == o.health &&
		s.affinity == o.affinity
}

// serviceSettings says whether svc is managed and how. The error wraps
// ErrBadAnnotation and names the annotation and what it accepts.
func serviceSettings(svc *corev1.Service) (settings, bool, error) {
	managed, err := isManaged(svc)
	if err != nil || !managed {
		return settings{}, false, err
	}
	s := defaultSettings(svc)
	if err := applyAnnotations(&s, svc.Annotations); err != nil {
		return settings{}, false, err
	}
	if err := applySessionAffinity(&s, svc); err != nil {
		return settings{}, false, err
	}
	return s, true, nil
}

func isManaged(svc *corev1.Service) (bool, error) {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return false, nil
	}
	v, ok := svc.Annotations[AnnotationEnabled]
	switch {
	case !ok:
		return svc.Spec.TrafficDistribution != nil && *svc.Spec.TrafficDistribution != "", nil
	case v == "true":
		return true, nil
	case v == "false":
		return false, nil
	}
	return false, fmt.Errorf("%w: %s: %q is neither \"true\" nor \"false\"", ErrBadAnnotation, AnnotationEnabled, v)
}

// defaultSettings follows Istio ambient's mapping of the Service's traffic fields.
func defaultSettings(svc *corev1.Service) settings {
	s := settings{scopes: closeScopes, mode: shared.ModeFailover.String()}
	if svc.Spec.TrafficDistribution != nil && *svc.Spec.TrafficDistribution == preferSameNode {
		s.scopes = sameNodeScopes
	}
	if p := svc.Spec.InternalTrafficPolicy; p != nil && *p == corev1.ServiceInternalTrafficPolicyLocal {
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
		s.scopes = scopes
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
