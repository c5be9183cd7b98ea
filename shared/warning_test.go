package shared

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// warnTopology: "api" has endpoints in us-east and ap-south and fails
// over with the rules given; "web" (a client) has endpoints in eu-west;
// node n1 is in sa-east.
func warnTopology(rules ...FailoverSpec) *Topology {
	ep := func(addr, region string) EndpointSpec {
		return EndpointSpec{Address: addr, Locality: Locality{"region": region, "zone": region + "-a"}}
	}
	return &Topology{
		Services: []ServiceSpec{
			{Name: "api", Spillover: &SpilloverSpec{}, Failover: rules,
				Endpoints: []EndpointSpec{ep("127.0.0.1:80", "us-east"), ep("127.0.0.2:80", "ap-south")}},
			{Name: "web", Endpoints: []EndpointSpec{ep("127.0.0.3:80", "eu-west")}},
		},
		Nodes: []NodeSpec{{Name: "n1", Locality: Locality{"region": "sa-east"}}},
	}
}

func buildWarned(t *testing.T, top *Topology) []Warning {
	t.Helper()
	var got []Warning
	if _, err := Build(top, BuildOptions{Warn: func(w Warning) { got = append(got, w) }}); err != nil {
		t.Fatal(err)
	}
	return got
}

// Issue 26 item 7: a failover region that no endpoint (and, for the from
// side, no node) has was accepted silently; Build now warns, naming the
// service, the field and the known regions.
func TestFailoverUnknownRegionWarns(t *testing.T) {
	cases := []struct {
		name  string
		rule  FailoverSpec
		field string   // "" no warning
		known []string // the warning's Known
	}{
		{"to: a typo", FailoverSpec{From: "us-east", To: "ap-soth"}, "failover[0].to", []string{"ap-south", "us-east"}},
		{"from: a typo", FailoverSpec{From: "ap-soth", To: "us-east"}, "failover[0].from", []string{"ap-south", "eu-west", "sa-east", "us-east"}},
		{"from: a client's region", FailoverSpec{From: "eu-west", To: "us-east"}, "", nil},
		{"from: a node's region", FailoverSpec{From: "sa-east", To: "ap-south"}, "", nil},
		{"to: a client's region, not the service's", FailoverSpec{From: "us-east", To: "eu-west"}, "failover[0].to", []string{"ap-south", "us-east"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := buildWarned(t, warnTopology(c.rule))
			if c.field == "" {
				if len(got) != 0 {
					t.Fatalf("warnings %v, want none", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("warnings %v, want one on %s", got, c.field)
			}
			w := got[0]
			if w.Service != "api" || w.Field != c.field || !slices.Equal(w.Known, c.known) || !strings.Contains(w.String(), `service "api": `+c.field) {
				t.Fatalf("warning %+v, want service api, field %s, known %v", w, c.field, c.known)
			}
		})
	}
}

// The builder reports the warnings Build reports for the same services,
// and follows the services the from regions depend on.
func TestBuilderWarnings(t *testing.T) {
	top := warnTopology(FailoverSpec{From: "eu-west", To: "ap-soth"})
	want := buildWarned(t, top)
	var b Builder
	if _, err := b.Update(top.Services, nil, 1); err != nil {
		t.Fatal(err)
	}
	if got := b.Warnings(top.Nodes); !slices.EqualFunc(got, want, warningEqual) || len(got) != 1 {
		t.Fatalf("builder warnings %v, Build's %v (want one)", got, want)
	}
	if _, err := b.Update(nil, []string{"web"}, 2); err != nil { // eu-west's only client goes
		t.Fatal(err)
	}
	got := b.Warnings(top.Nodes)
	if len(got) != 2 || got[0].Field != "failover[0].from" || got[0].Value != "eu-west" {
		t.Fatalf("after removing web: %v, want eu-west unknown as well", got)
	}
	b.Revert()
	if got := b.Warnings(top.Nodes); len(got) != 1 {
		t.Fatalf("after Revert: %v, want one warning again", got)
	}
}

func warningEqual(a, b Warning) bool {
	return a.String() == b.String() && slices.Equal(a.Known, b.Known)
}

// A warning's Known is its own: changing it changes nothing the builder
// reports next.
func TestWarningKnownIsACopy(t *testing.T) {
	top := warnTopology(FailoverSpec{From: "us-east", To: "ap-soth"})
	var b Builder
	if _, err := b.Update(top.Services, nil, 1); err != nil {
		t.Fatal(err)
	}
	w := b.Warnings(nil)
	w[0].Known[0] = "changed"
	if got := b.Warnings(nil); got[0].Known[0] != "ap-south" {
		t.Fatalf("known %v after a caller changed an earlier warning's", got[0].Known)
	}
}

// Issue 26: inside a priority that spans several values of a scope before
// region the tree would draw a locality per value, where Envoy draws one
// region/zone across them (docs/FORMAT.md, "Priority load"). The copies by
// the first scope merge them for one scope before region (a cluster, a
// network under either rule); Build warns of a second one (scopes
// [network, cluster, region, zone], the source's cluster drained), not of
// one cluster, nor of a service that never leaves its cluster
// (failover_limit).
func TestLocalitiesAcrossClustersWarn(t *testing.T) {
	svc := func(scopes []string, clusters ...string) ServiceSpec {
		s := ServiceSpec{Name: "api", Scopes: scopes, Spillover: &SpilloverSpec{}}
		for i, c := range clusters {
			s.Endpoints = append(s.Endpoints, EndpointSpec{Address: fmt.Sprintf("127.0.0.%d:80", i+1),
				Locality: Locality{"network": "n" + c, "cluster": c, "region": "r1", "zone": "z1"}})
		}
		return s
	}
	limited := svc([]string{"cluster", "region", "zone"}, "c1", "c2")
	limited.FailoverLimit = "cluster"
	plain := svc([]string{"network", "region", "zone"}, "c1", "c2")
	plain.NetworkRule = NetworkRulePlain
	cases := []struct {
		name string
		spec ServiceSpec
		want string // the scope warned of, "" none
	}{
		{"two clusters", svc([]string{"cluster", "region", "zone"}, "c1", "c2", "c2"), ""},
		{"two clusters, a label between", svc([]string{"cluster", "example.com/rack", "region", "zone"}, "c1", "c2", "c2"), ""},
		{"network, then two clusters", svc([]string{"network", "cluster", "region", "zone"}, "c1", "c1", "c2"), ""},
		{"network, then two clusters and a label", svc([]string{"network", "cluster", "example.com/rack", "region", "zone"}, "c1", "c1", "c2"), "cluster"},
		{"four labels before region", svc([]string{"cluster", "network", "example.com/rack", "example.com/row", "region", "zone"}, "c1", "c1", "c2"), "network"},
		{"one cluster", svc([]string{"cluster", "region", "zone"}, "c1", "c1"), ""},
		{"two networks under the network rule", svc([]string{"network", "region", "zone"}, "c1", "c2"), ""},
		{"two networks, plain rule", plain, ""},
		{"never leaves its cluster", limited, ""},
		{"no region", svc([]string{"cluster", "zone"}, "c1", "c2"), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, path := range []string{"Build", "Builder"} {
				var got []Warning
				if path == "Build" {
					got = buildWarned(t, &Topology{Services: []ServiceSpec{c.spec}})
				} else {
					var b Builder
					if _, err := b.Update([]ServiceSpec{c.spec}, nil, 1); err != nil {
						t.Fatal(err)
					}
					got = b.Warnings(nil)
				}
				switch {
				case c.want == "" && len(got) != 0:
					t.Errorf("%s: warnings %v, want none", path, got)
				case c.want != "" && (len(got) != 1 || got[0].Field != "scopes" || got[0].Value != c.want || !strings.Contains(got[0].Problem, "Envoy")):
					t.Errorf("%s: warnings %v, want one of scopes %q", path, got, c.want)
				}
			}
		})
	}
}
