package xds

import (
	"errors"
	"fmt"
	"net/netip"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loctree/loctree/loader/source/xds/internal/workloadapi"
)

// AddressType is the type URL of WDS, the resource istiod serves ztunnel
// (istio pilot/pkg/model: WorkloadType; ztunnel src/xds.rs ADDRESS_TYPE).
const AddressType = "type.googleapis.com/istio.workload.Address"

// workload is a decoded WDS Workload: what the tree needs of it.
type workload struct {
	uid      string
	addrs    []netip.Addr
	hostname string
	network  string
	gateway  bool // network_gateway set: reachable through it from other networks
	node     string
	cluster  string
	locality [3]string // region, zone, subzone
	healthy  bool
	capacity uint32
	services map[string]map[uint32]uint32 // "namespace/hostname" → service port → target port
}

// service is a decoded WDS Service.
type service struct {
	key      string // namespace/hostname, its resource name
	name, ns string
	hostname string
	vips     []netip.Addr
	vipNets  []string // the network of each VIP
	cidr     string   // a VIP with a prefix length: the tree holds single addresses
	ports    []port
	lb       *workloadapi.LoadBalancing
	families workloadapi.IPFamilies
}

type port struct{ service, target uint32 }

// errNotAddress: a resource whose type is not istio.workload.Address.
var errNotAddress = errors.New("not an istio.workload.Address")

// decode turns one resource into a workload or a service, or says why it
// cannot: the reason the agent NACKs it with (ztunnel src/state/workload.rs
// TryFrom<XdsWorkload>, src/state/service.rs TryFrom<&XdsService>: bad IP
// bytes and unknown enums are errors there too).
func decode(res *anypb.Any) (*workload, *service, error) {
	if res.GetTypeUrl() != AddressType {
		return nil, nil, fmt.Errorf("%w: %s", errNotAddress, res.GetTypeUrl())
	}
	var a workloadapi.Address
	if err := proto.Unmarshal(res.GetValue(), &a); err != nil {
		return nil, nil, fmt.Errorf("decode: %w", err)
	}
	switch t := a.Type.(type) {
	case *workloadapi.Address_Workload:
		w, err := decodeWorkload(t.Workload)
		return w, nil, err
	case *workloadapi.Address_Service:
		s, err := decodeService(t.Service)
		return nil, s, err
	default:
		return nil, nil, errors.New("an Address with neither a workload nor a service")
	}
}

func decodeWorkload(x *workloadapi.Workload) (*workload, error) {
	if x.GetUid() == "" {
		return nil, errors.New("workload without uid")
	}
	w := &workload{
		uid: x.GetUid(), hostname: x.GetHostname(), network: x.GetNetwork(), gateway: x.GetNetworkGateway() != nil,
		node: x.GetNode(), cluster: x.GetClusterId(),
		locality: [3]string{x.GetLocality().GetRegion(), x.GetLocality().GetZone(), x.GetLocality().GetSubzone()},
		capacity: 1, services: map[string]map[uint32]uint32{},
	}
	for _, b := range x.GetAddresses() {
		ip, err := addrOf(b)
		if err != nil {
			return nil, fmt.Errorf("workload %s: %w", w.uid, err)
		}
		w.addrs = append(w.addrs, ip)
	}
	switch x.GetStatus() {
	case workloadapi.WorkloadStatus_HEALTHY:
		w.healthy = true
	case workloadapi.WorkloadStatus_UNHEALTHY:
	default:
		return nil, fmt.Errorf("workload %s: unknown status %d", w.uid, x.GetStatus())
	}
	if c := x.GetCapacity(); c != nil {
		w.capacity = c.GetValue()
	}
	for key, pl := range x.GetServices() {
		ports := map[uint32]uint32{}
		for _, p := range pl.GetPorts() {
			ports[p.GetServicePort()] = p.GetTargetPort()
		}
		w.services[key] = ports
	}
	return w, nil
}

// addrOf is ztunnel's byte_to_ip (src/state/workload.rs): 4 or 16 bytes.
func addrOf(b []byte) (netip.Addr, error) {
	ip, ok := netip.AddrFromSlice(b)
	if !ok {
		return netip.Addr{}, fmt.Errorf("an address of %d bytes (want 4 or 16)", len(b))
	}
	return ip.Unmap(), nil
}

func decodeService(x *workloadapi.Service) (*service, error) {
	if x.GetHostname() == "" {
		return nil, errors.New("service without hostname")
	}
	s := &service{key: x.GetNamespace() + "/" + x.GetHostname(), name: x.GetName(), ns: x.GetNamespace(), hostname: x.GetHostname(), lb: x.GetLoadBalancing(), families: x.GetIpFamilies()}
	for _, a := range x.GetAddresses() {
		ip, err := addrOf(a.GetAddress())
		if err != nil {
			return nil, fmt.Errorf("service %s: %w", s.key, err)
		}
		if a.Length != nil && int(a.GetLength()) != ip.BitLen() {
			s.cidr = netip.PrefixFrom(ip, int(a.GetLength())).String()
			continue
		}
		s.vips, s.vipNets = append(s.vips, ip), append(s.vipNets, a.GetNetwork())
	}
	for _, p := range x.GetPorts() {
		s.ports = append(s.ports, port{p.GetServicePort(), p.GetTargetPort()})
	}
	if err := checkLoadBalancing(s.lb); err != nil {
		return nil, fmt.Errorf("service %s: %w", s.key, err)
	}
	return s, nil
}

// checkLoadBalancing refuses what ztunnel refuses (src/state/service.rs:
// an UNSPECIFIED_SCOPE or unknown scope, an unknown mode or health policy
// is a WorkloadError, and the resource is rejected).
func checkLoadBalancing(lb *workloadapi.LoadBalancing) error {
	if lb == nil {
		return nil
	}
	for _, sc := range lb.GetRoutingPreference() {
		if _, ok := scopeNames[sc]; !ok {
			return fmt.Errorf("load_balancing: invalid routing preference %s", sc)
		}
	}
	if _, ok := workloadapi.LoadBalancing_Mode_name[int32(lb.GetMode())]; !ok {
		return fmt.Errorf("load_balancing: unknown mode %d", lb.GetMode())
	}
	if _, ok := workloadapi.LoadBalancing_HealthPolicy_name[int32(lb.GetHealthPolicy())]; !ok {
		return fmt.Errorf("load_balancing: unknown health policy %d", lb.GetHealthPolicy())
	}
	return nil
}

// scopeNames are the tree's scope keys of WDS's routing preferences
// (ztunnel src/state.rs load_balance compares the same fields: locality
// region, zone, subzone; node; cluster_id; network).
var scopeNames = map[workloadapi.LoadBalancing_Scope]string{
	workloadapi.LoadBalancing_REGION:  "region",
	workloadapi.LoadBalancing_ZONE:    "zone",
	workloadapi.LoadBalancing_SUBZONE: "subzone",
	workloadapi.LoadBalancing_NODE:    "node",
	workloadapi.LoadBalancing_CLUSTER: "cluster",
	workloadapi.LoadBalancing_NETWORK: "network",
}
