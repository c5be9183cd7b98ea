package kubernetes

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/loctree/loctree/shared"
)

// nodeLabels returns a node's labels, nil when the node is unknown.
type nodeLabels func(name string) map[string]string

// treeInput is everything one Service's tree services are built from.
type treeInput struct {
	svc       *corev1.Service
	settings  svcSettings
	set       settings // the port's, set by treeServices
	slices    []*discoveryv1.EndpointSlice
	labels    nodeLabels
	clusterID string
	domain    string
	// nameShared: another namespace has a Service of the same name, so the
	// bare name means a different Service to each namespace's clients.
	nameShared bool
}

// treeServices turns one managed Service into its tree services (one per port
// and IP family), sorted by name. nodes collects the node names its endpoints
// are on.
func treeServices(in *treeInput, nodes map[string]struct{}) []shared.ServiceSpec {
	fams := families(in.svc)
	primary := primaryPort(in.svc)
	var out []shared.ServiceSpec
	for i := range in.svc.Spec.Ports {
		p := &in.svc.Spec.Ports[i]
		in.set = in.settings.forPort(p.Port)
		for j, fam := range fams {
			spec := in.header(p, i == primary, j, fam)
			spec.Endpoints = in.endpoints(p, fam.typ, nodes)
			out = append(out, spec)
		}
	}
	slices.SortFunc(out, func(a, b shared.ServiceSpec) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// family is one IP family of a Service and its cluster IP ("" when headless).
type family struct {
	typ discoveryv1.AddressType
	vip string
}

func families(svc *corev1.Service) []family {
	var out []family
	for _, ip := range svc.Spec.ClusterIPs {
		if a, err := netip.ParseAddr(ip); err == nil {
			out = append(out, family{typ: addressType(a), vip: a.String()})
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, f := range svc.Spec.IPFamilies { // headless: no VIP, endpoints per family
		out = append(out, family{typ: discoveryv1.AddressType(f)})
	}
	if len(out) == 0 {
		out = append(out, family{typ: discoveryv1.AddressTypeIPv4})
	}
	return out
}

func addressType(a netip.Addr) discoveryv1.AddressType {
	if a.Is4() || a.Is4In6() {
		return discoveryv1.AddressTypeIPv4
	}
	return discoveryv1.AddressTypeIPv6
}

// primaryPort is the index of the first TCP port, -1 if none.
func primaryPort(svc *corev1.Service) int {
	for i, p := range svc.Spec.Ports {
		if protocol(p.Protocol) == corev1.ProtocolTCP {
			return i
		}
	}
	return -1
}

func protocol(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

// header is a tree service without endpoints for port p in the famIdx-th family.
func (in *treeInput) header(p *corev1.ServicePort, primary bool, famIdx int, fam family) shared.ServiceSpec {
	fqdn := fmt.Sprintf("%s.%s.svc.%s", in.svc.Name, in.svc.Namespace, in.domain)
	key := strconv.Itoa(int(p.Port))
	if proto := protocol(p.Protocol); proto != corev1.ProtocolTCP {
		key += "/" + strings.ToLower(string(proto))
	}
	spec := shared.ServiceSpec{
		Name:   fqdn + ":" + key,
		Scopes: in.set.scopes, Mode: in.set.mode, Policy: in.set.policy, Health: in.set.health,
		Spillover: in.set.spillover, Failover: in.set.failover, LocalityLB: in.set.localityLB,
		Distribute: in.set.distribute,
	}
	if timeout := in.set.affinity; timeout != 0 {
		spec.SessionAffinity = &shared.SessionAffinitySpec{TimeoutSeconds: &timeout}
	}
	if primary {
		spec.Name = fqdn
	}
	if fam.vip != "" {
		spec.VIP = netip.AddrPortFrom(netip.MustParseAddr(fam.vip), uint16(p.Port)).String()
	}
	if famIdx > 0 {
		spec.Name += "#" + strings.ToLower(string(fam.typ))
		return spec
	}
	if protocol(p.Protocol) == corev1.ProtocolTCP {
		spec.Hosts = hosts(in.svc, key, fqdn, primary, in.nameShared)
	}
	return spec
}

// hosts are the names a client may use for a port. The bare name (svc,
// svc:port) resolves through the client's own namespace (the resolv.conf
// search path), so it is left out while another namespace has a Service of
// the same name: the tree has one answer per host for every client.
func hosts(svc *corev1.Service, port, fqdn string, primary, nameShared bool) []string {
	short := []string{svc.Name + "." + svc.Namespace, svc.Name + "." + svc.Namespace + ".svc"}
	if !nameShared {
		short = append([]string{svc.Name}, short...)
	}
	var out []string
	for _, h := range short {
		out = append(out, h+":"+port)
	}
	if primary {
		out = append(out, fqdn+":"+port)
		out = append(out, short...)
	}
	return out
}
