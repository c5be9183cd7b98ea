package xds

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/loctree/loctree/loader/source/xds/internal/workloadapi"
	"github.com/loctree/loctree/shared"
)

// mapInput is what one WDS Service's tree services are built from.
type mapInput struct {
	svc       *service
	workloads []*workload // the workloads whose services name svc.key
	network   string      // the agent's own network ("" while unknown)
	// nameShared: a Service of the same name lives in another namespace,
	// so the bare name means a different Service to each namespace's clients.
	nameShared bool
}

// managed says whether istiod asks for locality load balancing of the
// service: load_balancing with mode STRICT or FAILOVER. UNSPECIFIED_MODE is
// ztunnel's Standard (no scopes considered) and PASSTHROUGH sends traffic
// to its original destination (ztunnel src/state/service.rs
// LoadBalancerMode): the agent leaves both to the mesh, as the Kubernetes
// source leaves a Service that has not opted in.
func (s *service) managed() bool {
	m := s.lb.GetMode()
	return m == workloadapi.LoadBalancing_STRICT || m == workloadapi.LoadBalancing_FAILOVER
}

// treeServices turns one managed WDS Service into its tree services (one
// per port and IP family, sorted by name), named and given hosts as the
// Kubernetes source names them, or says why the tree cannot hold it (the
// service is then refused alone).
func treeServices(in *mapInput) ([]shared.ServiceSpec, error) {
	if in.svc.cidr != "" {
		return nil, fmt.Errorf("its VIP %s is a range: the tree holds single addresses", in.svc.cidr)
	}
	if err := in.reachable(); err != nil {
		return nil, err
	}
	var out []shared.ServiceSpec
	seen := map[uint32]bool{}
	for i, p := range in.svc.ports {
		if seen[p.service] {
			continue // the same port number of another protocol: WDS does not say which
		}
		seen[p.service] = true
		for j, fam := range in.families() {
			spec := in.header(p, i == 0, j, fam)
			spec.Endpoints = in.endpoints(p, fam.v6)
			out = append(out, spec)
		}
	}
	slices.SortFunc(out, func(a, b shared.ServiceSpec) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// reachable refuses a service with an endpoint the kernel cannot connect
// to directly: a workload known by DNS name only (ztunnel resolves it), or
// one on another network reachable only through its network gateway
// (ztunnel tunnels to the gateway; src/state.rs load_balance keeps such a
// workload only when it is on another network and has a gateway).
func (in *mapInput) reachable() error {
	for _, w := range in.workloads {
		switch {
		case len(w.addrs) > 0:
		case w.hostname != "":
			return fmt.Errorf("workload %s has a DNS name (%s) and no address", w.uid, w.hostname)
		case w.gateway && w.network != in.network:
			return fmt.Errorf("workload %s on network %q is reachable only through its network gateway", w.uid, w.network)
		}
	}
	return nil
}

// family is one IP family of a service and its VIP (invalid when headless).
type family struct {
	v6  bool
	vip netip.Addr
}

// families are the service's VIPs, one per family in the order istiod
// lists them (the Service's clusterIPs): of several VIPs of one family
// (one per network), the one on the agent's network, else the first.
// Headless: the families of ip_families.
func (in *mapInput) families() []family {
	var out []family
	for i, ip := range in.svc.vips {
		v6 := ip.Is6()
		k := slices.IndexFunc(out, func(f family) bool { return f.v6 == v6 })
		switch {
		case k < 0:
			out = append(out, family{v6, ip})
		case in.svc.vipNets[i] == in.network && in.network != "":
			out[k].vip = ip
		}
	}
	if len(out) > 0 {
		return out
	}
	switch in.svc.families {
	case workloadapi.IPFamilies_IPV6_ONLY:
		return []family{{v6: true}}
	case workloadapi.IPFamilies_DUAL:
		return []family{{}, {v6: true}}
	}
	return []family{{}}
}

// header is a tree service without endpoints: names and hosts as the
// Kubernetes source gives them (loader/source/kubernetes/services.go), the
// settings from load_balancing.
func (in *mapInput) header(p port, primary bool, famIdx int, fam family) shared.ServiceSpec {
	s := in.svc
	key := strconv.Itoa(int(p.service))
	spec := shared.ServiceSpec{Name: s.hostname + ":" + key}
	if primary {
		spec.Name = s.hostname
	}
	spec.Scopes, spec.Mode, spec.Health = settings(s.lb)
	if fam.vip.IsValid() {
		spec.VIP = netip.AddrPortFrom(fam.vip, uint16(p.service)).String()
	}
	if famIdx > 0 {
		spec.Name += "#" + familyName(fam.v6)
		return spec
	}
	spec.Hosts = in.hosts(key, primary)
	return spec
}

func familyName(v6 bool) string {
	if v6 {
		return "ipv6"
	}
	return "ipv4"
}

// settings maps load_balancing (workload.proto LoadBalancing) to the tree:
// routing_preference → scopes in order, mode STRICT → strict and FAILOVER
// → failover, health_policy ALLOW_ALL → allow_all (ztunnel's
// should_include_endpoint, src/state/service.rs). A first scope network
// gets the tree's ztunnel network rule (shared.ServiceSpec.NetworkRule's
// default for such a service): ztunnel's load_balance ranks the other
// scopes when the network does not match.
func settings(lb *workloadapi.LoadBalancing) (scopes []string, mode, health string) {
	for _, sc := range lb.GetRoutingPreference() {
		scopes = append(scopes, scopeNames[sc])
	}
	mode = "failover"
	if lb.GetMode() == workloadapi.LoadBalancing_STRICT {
		mode = "strict"
	}
	if lb.GetHealthPolicy() == workloadapi.LoadBalancing_ALLOW_ALL {
		health = "allow_all"
	}
	return scopes, mode, health
}

// hosts are the names a client may use for a port, as the Kubernetes
// source's hosts: <name>:<port>, <name>.<ns>:<port>, <name>.<ns>.svc:<port>
// and, for the first port, <hostname>:<port> and the names without a port.
// A hostname that is not <name>.<ns>.svc.<domain> (a ServiceEntry's) has
// only <hostname>:<port> and <hostname>.
func (in *mapInput) hosts(port string, primary bool) []string {
	s := in.svc
	var short []string
	if strings.HasPrefix(s.hostname, s.name+"."+s.ns+".svc.") {
		short = []string{s.name + "." + s.ns, s.name + "." + s.ns + ".svc"}
		if !in.nameShared {
			short = append([]string{s.name}, short...)
		}
	}
	var out []string
	for _, h := range short {
		out = append(out, h+":"+port)
	}
	if primary {
		out = append(out, s.hostname+":"+port)
		out = append(out, short...)
		if len(short) == 0 {
			out = append(out, s.hostname)
		}
	}
	return out
}

// endpoints are the service's workloads with an address of the family,
// sorted by address. Workload → endpoint (workload.proto Workload):
// address: the workload's address of the family, port: the workload's own
// target port for the service port (Workload.services[key].ports, which
// resolves named ports), else the service's target_port; a workload with
// neither is left out, as ztunnel's load_balance leaves it out;
// locality: region, zone, subzone from locality, node from node, network
// from network, cluster from cluster_id; weight: capacity (default 1,
// ztunnel's default_capacity); healthy: status HEALTHY.
func (in *mapInput) endpoints(p port, v6 bool) []shared.EndpointSpec {
	out := []shared.EndpointSpec{}
	for _, w := range in.workloads {
		target := w.services[in.svc.key][p.service]
		if target == 0 {
			target = p.target
		}
		i := slices.IndexFunc(w.addrs, func(a netip.Addr) bool { return a.Is6() == v6 })
		if target == 0 || i < 0 {
			continue
		}
		out = append(out, endpointOf(w, netip.AddrPortFrom(w.addrs[i], uint16(target))))
	}
	slices.SortFunc(out, func(a, b shared.EndpointSpec) int { return cmp.Compare(a.Address, b.Address) })
	return out
}

func endpointOf(w *workload, addr netip.AddrPort) shared.EndpointSpec {
	ep := shared.EndpointSpec{Address: addr.String(), Locality: w.localityOf()}
	if w.capacity != 1 {
		ep.Weight = pointer(w.capacity)
	}
	if !w.healthy {
		ep.Healthy = pointer(false)
	}
	return ep
}

// localityOf is the workload's locality in the tree's scope keys, empty
// values left out.
func (w *workload) localityOf() shared.Locality {
	loc := shared.Locality{}
	for k, v := range map[string]string{
		"region": w.locality[0], "zone": w.locality[1], "subzone": w.locality[2],
		"node": w.node, "network": w.network, "cluster": w.cluster,
	} {
		if v != "" {
			loc[k] = v
		}
	}
	return loc
}

func pointer[T any](v T) *T { return &v }
