package kubernetes

import (
	"fmt"

	"sigs.k8s.io/yaml"
)

// Mesh is what the agent takes from Istio's mesh configuration (the mesh
// key of the istio ConfigMap in the Istio namespace).
type Mesh struct {
	// RootNamespace holds the mesh-wide DestinationRules; default
	// istio-system.
	RootNamespace string
	// LocalityLB is the mesh default localityLbSetting, used for a Service a
	// DestinationRule applies to without a localityLbSetting of its own and
	// without a traffic distribution; default {enabled: true}, Istio's.
	LocalityLB *LocalityLBSetting
}

// DefaultMesh is Istio's default mesh configuration, as far as the agent
// reads it (DefaultMeshConfig, istio/istio pkg/config/mesh/mesh.go:85-91).
func DefaultMesh() Mesh {
	on := true
	return Mesh{RootNamespace: DefaultRootNamespace, LocalityLB: &LocalityLBSetting{Enabled: &on}}
}

// ParseMeshConfig reads Istio's mesh configuration (YAML, as in the istio
// ConfigMap's mesh key). A field it sets replaces the default, as Istio's
// ApplyMeshConfig does; fields the agent does not use are ignored, but an
// unknown field inside localityLbSetting is an error.
func ParseMeshConfig(data []byte) (Mesh, error) {
	var mc struct {
		RootNamespace     string             `json:"rootNamespace,omitempty"`
		LocalityLbSetting *LocalityLBSetting `json:"localityLbSetting,omitempty"`
	}
	if err := yaml.Unmarshal(data, &mc); err != nil {
		return Mesh{}, fmt.Errorf("%w: mesh config: %w", ErrConfig, err)
	}
	m := DefaultMesh()
	if mc.RootNamespace != "" {
		m.RootNamespace = mc.RootNamespace
	}
	if mc.LocalityLbSetting != nil {
		m.LocalityLB = mc.LocalityLbSetting
	}
	return m, nil
}
