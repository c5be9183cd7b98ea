package main

import (
	"github.com/loctree/loctree/filter/internal/abi"
)

// Well-known node properties Envoy exposes, per scope key (the scope keys
// of the Kubernetes source).
var (
	nodeLocalityField = map[string]string{"region": "region", "zone": "zone", "subzone": "sub_zone"}
	// Istio's node metadata (istio.io/istio pkg/model NodeMetadata).
	nodeMetadata = map[string]string{"network": "NETWORK", "cluster": "CLUSTER_ID", "node": "NODE_NAME"}
	nodeLabel    = map[string]string{
		"region":  "topology.kubernetes.io/region",
		"zone":    "topology.kubernetes.io/zone",
		"subzone": "topology.istio.io/subzone",
		"network": "topology.istio.io/network",
	}
)

// sourceLocality resolves the proxy's value of each scope key: the
// configured locality if any (missing keys are ""), else
// xds.node.locality.{region,zone,sub_zone} for region, zone and subzone,
// xds.node.metadata.{NETWORK,CLUSTER_ID,NODE_NAME} for network, cluster and
// node, else the node's LABELS (topology.kubernetes.io/region|zone,
// topology.istio.io/subzone|network, or the scope key itself for other
// scopes).
type sourceLocality struct {
	configured map[string]string
	cache      map[string]string
}

func newSourceLocality(configured map[string]string) *sourceLocality {
	return &sourceLocality{configured: configured, cache: map[string]string{}}
}

func (l *sourceLocality) value(scope string) string {
	if l.configured != nil {
		return l.configured[scope]
	}
	if v, ok := l.cache[scope]; ok {
		return v
	}
	v := l.fromNode(scope)
	l.cache[scope] = v
	return v
}

func (l *sourceLocality) fromNode(scope string) string {
	if f, ok := nodeLocalityField[scope]; ok {
		if b, err := abi.GetProperty([]string{"xds", "node", "locality", f}); err == nil && len(b) > 0 {
			return string(b)
		}
	}
	if m, ok := nodeMetadata[scope]; ok {
		if b, err := abi.GetProperty([]string{"xds", "node", "metadata", m}); err == nil && len(b) > 0 {
			return string(b)
		}
	}
	key := scope
	if k, ok := nodeLabel[scope]; ok {
		key = k
	}
	if b, err := abi.GetProperty([]string{"xds", "node", "metadata", "LABELS", key}); err == nil {
		return string(b)
	}
	return ""
}
