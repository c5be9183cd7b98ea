// Package kubernetes is the agent's Kubernetes endpoint source. It watches
// discovery.k8s.io/v1 EndpointSlices, v1 Services, Nodes and Namespaces through
// client-go shared informers, and Istio's networking.istio.io/v1
// DestinationRules through a dynamic client, and turns the services that
// opted in into a *shared.Topology, plus the locality of the node the agent
// runs on.
//
// Mapping (docs/ISTIO.md has the user's view):
//
//   - A Service is managed when it has a traffic distribution
//     (spec.trafficDistribution, else Istio's annotation
//     networking.istio.io/traffic-distribution on the Service, else on its
//     Namespace, as Istio's GetTrafficDistribution), when a DestinationRule
//     with a localityLbSetting applies to it, or with the annotation
//     loctree.io/enabled: "true" ("false" opts a service out).
//   - DestinationRules: the one Istio gives a client in the Service's
//     namespace (most specific host, then the root namespace's exported
//     ones; port-level settings replace the rule's), with Istio's
//     precedence: the rule's localityLbSetting, then the traffic
//     distribution, then the mesh default (Mesh). enabled: false or no
//     outlierDetection give locality_lb false; failover gives scopes
//     [region, zone, subzone] with the failover rules and spillover;
//     failoverPriority gives its labels as scopes; minHealthPercent the
//     panic threshold; distribute gives distribute rules over Envoy's
//     priority load. A setting the tree cannot honour (a distribute rule
//     beyond the tree's, zoneAwareLbSetting, failover with
//     failoverPriority, unknown fields)
//     is a Warning Event on the DestinationRule; the service keeps its last
//     good settings. docs/ISTIO.md has the whole table.
//   - Scopes and mode follow Istio ambient: PreferClose and PreferSameZone give
//     [network, region, zone] failover, PreferSameNode gives [network, region,
//     zone, subzone, node], internalTrafficPolicy: Local gives [node] strict;
//     loctree.io/enabled alone gives [network, region, zone, subzone]. The annotations
//     loctree.io/scopes (comma list), loctree.io/mode and loctree.io/policy
//     override them; publishNotReadyAddresses gives health allow_all.
//   - Every service port is its own tree service. The first TCP port is named
//     <svc>.<ns>.svc.<domain>, every other port <svc>.<ns>.svc.<domain>:<port>
//     (non-TCP ports :<port>/<protocol>), because tree names and hosts are
//     unique. Hosts are the short names with the port (<svc>:<port>,
//     <svc>.<ns>:<port>, <svc>.<ns>.svc:<port>); the first TCP port also answers
//     to the short names without a port and to <fqdn>:<port>. While another
//     namespace has a Service of the same name, the bare <svc> and
//     <svc>:<port> are left out: they name a different Service to each
//     namespace's clients.
//   - A tree service holds one VIP. A dual-stack Service's second cluster IP is
//     a twin tree service named <name>#ipv6 (or #ipv4), with no hosts, whose
//     endpoints are the addresses of that family: a connect to a VIP is only
//     ever redirected to an endpoint of the VIP's family.
//   - Endpoint locality: region, zone and subzone from the node's labels
//     (topology.kubernetes.io/region, topology.kubernetes.io/zone,
//     topology.istio.io/subzone), zone falling back to the EndpointSlice's zone;
//     node = nodeName; network = the node label topology.istio.io/network;
//     cluster = the configured cluster ID; any other scope is a node label key.
//   - Health: conditions.ready; terminating endpoints are unhealthy unless no
//     endpoint of the tree service is ready, then the serving terminating ones
//     are healthy (as kube-proxy does).
//
// A bad annotation is reported as a Warning Event on the Service (raised by
// the agent of the node with the smallest name only, so N agents do not make N
// copies) and in every agent's log; the service keeps its last good settings
// (its endpoints keep being tracked). Changes are debounced and each Update names the tree services that
// changed.
package kubernetes
