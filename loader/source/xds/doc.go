// Package xds is the agent's xDS endpoint source (loctree agent --source
// xds): it reads istiod's workload discovery (WDS,
// type.googleapis.com/istio.workload.Address) over delta ADS as ztunnel
// does (istio/ztunnel src/xds/client.rs at 62d826530e5c), and turns the
// Services istiod gives load-balancing scopes into tree services.
//
// The client (client.go) subscribes to every resource, ACKs each response
// or NACKs it naming the resources that do not decode (the others stay
// applied), removes removed resources, and reconnects with a jittered
// backoff from 10 ms to 15 s, resuming with initial_resource_versions.
// The store (store.go) keeps the decoded workloads and services and the
// services each change touches; Run maps those (mapping.go) and publishes
// the first complete state, then each batch of changes.
//
// Mapping (docs/AGENT.md has the table; workload.proto names the fields):
//
//   - A Service is managed when load_balancing.mode is STRICT or FAILOVER.
//   - Each port and IP family is a tree service, named and given hosts as
//     the Kubernetes source names them: the first port's name is the
//     Service's hostname, the others hostname:port, a second family a
//     #ipv6 (or #ipv4) twin with no hosts.
//   - routing_preference → scopes (region, zone, subzone, node, cluster,
//     network), mode → strict or failover, health_policy ALLOW_ALL →
//     allow_all.
//   - A Workload naming the service is an endpoint per family: its address,
//     its own target port for the service port (else the service's
//     target_port), locality, node, network and cluster_id as the scope
//     values, capacity as the weight, status UNHEALTHY as unhealthy.
//   - The agent's locality is that of the workloads on its node.
//
// A Service the tree cannot hold (a CIDR VIP, an endpoint known only by a
// DNS name or reachable only through a network gateway) is refused alone:
// logged once per reason, counted, its last tree services kept.
package xds
