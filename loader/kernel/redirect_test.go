package kernel

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"syscall"
	"testing"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

func u32(v uint32) *uint32 { return &v }
func boolp(v bool) *bool   { return &v }

func ep(addr, region, zone string) shared.EndpointSpec {
	return shared.EndpointSpec{Address: addr, Locality: shared.Locality{"region": region, "zone": zone}}
}

// mesh is the e2e topology: VIPs in 127.77.0.0/16, backends on 127.0.x.y.
func mesh() *shared.Topology {
	scopes := []string{"region", "zone"}
	unhealthy := ep("127.0.1.5:9001", "r1", "z1")
	unhealthy.Healthy = boolp(false)
	heavy := ep("127.0.3.2:9003", "r1", "z1")
	heavy.Weight = u32(3)
	return &shared.Topology{Services: []shared.ServiceSpec{
		{Name: "reviews", VIP: "127.77.0.1:80", Scopes: scopes, Endpoints: []shared.EndpointSpec{
			ep("127.0.1.1:9001", "r1", "z1"), ep("127.0.1.2:9001", "r1", "z1"), ep("127.0.1.3:9001", "r1", "z2"),
			ep("127.0.1.4:9001", "r2", "z3"), unhealthy,
		}},
		{Name: "payments", VIP: "127.77.0.2:80", Scopes: scopes, Mode: "strict", Endpoints: []shared.EndpointSpec{
			ep("127.0.2.1:9002", "r2", "z3"), ep("127.0.2.2:9002", "r1", "z2"),
		}},
		{Name: "weighted", VIP: "127.77.0.3:80", Scopes: scopes, Policy: "weighted", Endpoints: []shared.EndpointSpec{
			ep("127.0.3.1:9003", "r1", "z1"), heavy, ep("127.0.3.3:9003", "r2", "z3"),
		}},
		{Name: "rr", VIP: "127.77.0.4:80", Scopes: scopes, Policy: "round_robin", Endpoints: []shared.EndpointSpec{
			ep("127.0.4.1:9004", "r1", "z1"), ep("127.0.4.2:9004", "r1", "z1"), ep("127.0.4.3:9004", "r1", "z1"),
		}},
		{Name: "lc", VIP: "127.77.0.5:80", Scopes: scopes, Policy: "least_connections", Endpoints: []shared.EndpointSpec{
			ep("127.0.5.1:9005", "r1", "z1"), ep("127.0.5.2:9005", "r1", "z1"),
		}},
	}}
}

func backendsOf(top *shared.Topology) []string {
	var out []string
	for _, s := range top.Services {
		for _, e := range s.Endpoints {
			out = append(out, e.Address)
		}
	}
	return out
}

func candidates(t *shared.Tree, s *shared.Service, src shared.Locality) []string {
	r := s.Lookup(src)
	var out []string
	for i := r.Lo; i < r.Hi; i++ {
		out = append(out, t.Endpoint(i).Addr.String())
	}
	return out
}

// setup installs tree with the node's locality and attaches the programs to
// a private cgroup holding this test process.
func setup(t *testing.T, tree *shared.Tree, loc shared.Locality) *Installer {
	t.Helper()
	in, _ := setupWith(t, tree, Config{Locality: loc})
	return in
}

// install starts backends for top's endpoints, builds top (generation 1)
// and installs it as setup does.
func install(t *testing.T, top *shared.Topology, loc shared.Locality) (*shared.Tree, *Installer) {
	t.Helper()
	kerneltest.Backends(t, backendsOf(top))
	tree := mustBuild(t, top, 1)
	return tree, setup(t, tree, loc)
}

// specsOf is the topology of the cases' services.
func specsOf[C any](cases []C, spec func(C) shared.ServiceSpec) *shared.Topology {
	top := &shared.Topology{}
	for _, c := range cases {
		top.Services = append(top.Services, spec(c))
	}
	return top
}

// setupWith is setup with any config; it also returns the cgroup the
// programs are attached to.
func setupWith(t *testing.T, tree *shared.Tree, cfg Config) (*Installer, string) {
	t.Helper()
	cg := kerneltest.Cgroup(t)
	in, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	if _, err := in.Apply(tree); err != nil {
		t.Fatal(err)
	}
	if err := in.Attach(cg); err != nil {
		t.Fatal(err)
	}
	return in, cg
}

// TestConnectRedirect: for several node localities every connection to a
// VIP lands in the candidate set shared/ computes, and strict with no
// match is refused.
func TestConnectRedirect(t *testing.T) {
	kerneltest.RequireRoot(t)
	top := mesh()
	kerneltest.Backends(t, backendsOf(top))
	tree, err := shared.Build(top, shared.BuildOptions{Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	sources := []shared.Locality{
		{"region": "r1", "zone": "z1"}, {"region": "r1", "zone": "z2"}, {"region": "r1", "zone": "z9"},
		{"region": "r2", "zone": "z3"}, {"region": "r3"}, {},
	}
	for _, src := range sources {
		t.Run(fmt.Sprint(src), func(t *testing.T) {
			setup(t, tree, src)
			for _, s := range tree.Services() {
				checkService(t, tree, s, src)
			}
		})
	}
}

func checkService(t *testing.T, tree *shared.Tree, s *shared.Service, src shared.Locality) {
	t.Helper()
	want := candidates(tree, s, src)
	seen := map[string]int{}
	for range 3 * max(len(want), 1) * 4 {
		got, err := kerneltest.Ask(s.VIP().String())
		if len(want) == 0 {
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Fatalf("%s: strict with no match: got %q, %v; want ECONNREFUSED", s.Name(), got, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s via %s: %v", s.Name(), s.VIP(), err)
		}
		if !slices.Contains(want, got) {
			t.Fatalf("%s: connected to %s, candidates %v", s.Name(), got, want)
		}
		seen[got]++
	}
	for _, w := range want {
		switch {
		case s.Policy() == shared.PolicyRoundRobin && seen[w] != seen[want[0]]:
			t.Fatalf("%s: round robin counts %v", s.Name(), seen)
		case s.Policy() == shared.PolicyRandom && seen[w] == 0: // P(miss) < 2e-6
			t.Fatalf("%s: random never picked candidate %s: %v", s.Name(), w, seen)
		}
	}
}

// TestNonVIPUntouched: a connect to an address that is no VIP is not
// rewritten.
func TestNonVIPUntouched(t *testing.T) {
	kerneltest.RequireRoot(t)
	top := mesh()
	kerneltest.Backends(t, []string{"127.0.9.9:9009"})
	tree, _ := shared.Build(top, shared.BuildOptions{Generation: 1})
	setup(t, tree, shared.Locality{"region": "r1", "zone": "z1"})
	if got, err := kerneltest.Ask("127.0.9.9:9009"); err != nil || got != "127.0.9.9:9009" {
		t.Fatalf("direct connect: %q, %v", got, err)
	}
	if _, err := net.Dial("tcp", "127.77.0.1:81"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("VIP with another port: %v, want plain ECONNREFUSED from the loopback", err)
	}
}
