// Package istio holds loctree's Kubernetes and Istio manifests: the kustomize
// base (agent DaemonSet, RBAC, tree Service, WasmPlugin), per-service
// examples, the persistent-session and xds overlays, a standalone Envoy bootstrap and
// the istiod values for the filter's per-service metrics (mesh/).
// Files embeds them for tools; the package's tests decode every one strictly
// into its official Go type. No Istio, Envoy or API server runs here.
package istio

import "embed"

// Files holds every manifest under istio/.
//
//go:embed *.yaml install/* base/*.yaml examples/*.yaml overlays/persistent-session/*.yaml overlays/xds/*.yaml envoy/*.yaml mesh/*.yaml
var Files embed.FS
