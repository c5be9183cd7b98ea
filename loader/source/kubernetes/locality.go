package kubernetes

import (
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/loctree/loctree/shared"
)

// Node labels that carry locality.
const (
	LabelRegion  = "topology.kubernetes.io/region"
	LabelZone    = "topology.kubernetes.io/zone"
	LabelSubzone = "topology.istio.io/subzone"
	LabelNetwork = "topology.istio.io/network"
)

// scopeValue is the value of scope for an endpoint on nodeName (labels are
// that node's labels, nil if unknown) whose EndpointSlice says zone.
func scopeValue(scope, nodeName, zone string, labels map[string]string, clusterID string) string {
	switch scope {
	case ScopeRegion:
		return labels[LabelRegion]
	case ScopeZone:
		if z := labels[LabelZone]; z != "" {
			return z
		}
		return zone
	case ScopeSubzone:
		return labels[LabelSubzone]
	case ScopeNetwork:
		return labels[LabelNetwork]
	case ScopeNode:
		return nodeName
	case ScopeCluster:
		return clusterID
	}
	return labels[scope]
}

// endpointLocality is the locality of an endpoint for the given scopes; empty
// values are left out (a missing key is the empty value). A scope
// "label=value" (failoverPriority's form) needs the endpoint's label.
func endpointLocality(scopes []string, nodeName, zone string, labels map[string]string, clusterID string) shared.Locality {
	loc := make(shared.Locality, len(scopes))
	for _, sc := range scopes {
		sc, _, _ = strings.Cut(sc, "=")
		if v := scopeValue(sc, nodeName, zone, labels, clusterID); v != "" {
			loc[sc] = v
		}
	}
	return loc
}

var fixedScopes = []string{ScopeNetwork, ScopeCluster, ScopeRegion, ScopeZone, ScopeSubzone, ScopeNode}

// NodeLocality is the locality of a node as a source: the fixed scopes plus
// every label of the node by its key (for services whose scopes are label keys).
func NodeLocality(node *corev1.Node, clusterID string) shared.Locality {
	loc := make(shared.Locality, len(node.Labels)+len(fixedScopes))
	maps.Copy(loc, node.Labels)
	for _, sc := range fixedScopes {
		if v := scopeValue(sc, node.Name, "", node.Labels, clusterID); v != "" {
			loc[sc] = v
		}
	}
	return loc
}
