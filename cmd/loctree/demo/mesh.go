package demo

import (
	"encoding/json"

	"github.com/loctree/loctree/shared"
)

// The demo's mesh: one service on loopback, its VIP in 127.77.0.0/16, six
// backends on 127.0.77.0/24 in four zones of three regions.
const (
	ServiceName = "reviews"
	VIP         = "127.77.0.1:9080"
)

type backend struct {
	addr     string
	locality shared.Locality
}

var backends = []backend{
	{"127.0.77.1:9080", loc("us-east", "us-east-1a")},
	{"127.0.77.2:9080", loc("us-east", "us-east-1a")},
	{"127.0.77.3:9080", loc("us-east", "us-east-1b")},
	{"127.0.77.4:9080", loc("us-west", "us-west-2a")},
	{"127.0.77.5:9080", loc("us-west", "us-west-2a")},
	{"127.0.77.6:9080", loc("eu-central", "eu-central-1a")},
}

// failZone is the zone whose endpoints the failover phase marks unhealthy.
const failZone = "us-east-1a"

// Source is a client locality: one cgroup for the kernel path and one
// `wasm serve` proxy for the L7 path.
type Source struct {
	Name     string          `json:"name"`
	Locality shared.Locality `json:"locality"`
}

var sources = []Source{
	{"us-east-1a", loc("us-east", "us-east-1a")},
	{"us-east-1c", loc("us-east", "us-east-1c")},
	{"us-west-2a", loc("us-west", "us-west-2a")},
	{"ap-south-1a", loc("ap-south", "ap-south-1a")},
}

func loc(region, zone string) shared.Locality {
	return shared.Locality{"region": region, "zone": zone}
}

// localityName is "region/zone".
func localityName(l shared.Locality) string {
	return l["region"] + "/" + l["zone"]
}

// backendLocality is the locality of a backend address ("" if none).
func backendLocality(addr string) string {
	for _, b := range backends {
		if b.addr == addr {
			return localityName(b.locality)
		}
	}
	return ""
}

// Mesh is the demo's topology, with the endpoints of us-east-1a unhealthy
// when fail (the failover phase).
func Mesh(fail bool) *shared.Topology {
	svc := shared.ServiceSpec{
		Name: ServiceName, Hosts: []string{"reviews.default"}, VIP: VIP,
		Scopes: []string{"region", "zone"}, Mode: "failover", Policy: "random",
	}
	for _, b := range backends {
		ep := shared.EndpointSpec{Address: b.addr, Locality: b.locality}
		if fail && b.locality["zone"] == failZone {
			ep.Healthy = new(bool)
		}
		svc.Endpoints = append(svc.Endpoints, ep)
	}
	return &shared.Topology{Services: []shared.ServiceSpec{svc}}
}

// topologyJSON is Mesh(fail) as a topology file.
func topologyJSON(fail bool) []byte {
	b, err := json.MarshalIndent(Mesh(fail), "", "  ")
	if err != nil {
		panic(err) // plain data
	}
	return append(b, '\n')
}

// candidates is shared's candidate set of src in t.
func candidates(top *shared.Topology, src shared.Locality) ([]string, error) {
	t, err := shared.Build(top, shared.BuildOptions{Generation: 1})
	if err != nil {
		return nil, err
	}
	svc, _ := t.Service(ServiceName)
	r := svc.Lookup(src)
	var out []string
	for i := r.Lo; i < r.Hi; i++ {
		out = append(out, t.Endpoint(i).Addr.String())
	}
	return out, nil
}

// pluginConfig is the filter configuration of a source's proxy: the tree
// from the agent, the source's locality.
func pluginConfig(src Source, refreshMS int) []byte {
	cfg := map[string]any{
		"tree":     map[string]any{"cluster": "loctree-agent", "refresh_ms": refreshMS},
		"locality": src.Locality,
	}
	b, _ := json.Marshal(cfg)
	return b
}
