package shared

import (
	"errors"
	"strings"
	"testing"
)

// TestLocalityLBDisabled: Istio's localityLbSetting.enabled: false turns
// locality load balancing off: every source gets every eligible endpoint
// (and, with spillover, one priority holding all endpoints), in strict mode
// too. It is encoded as one reserved scope with the empty value everywhere,
// so the plain lookup — and the kernel and the filter, which walk the same
// tree — give the same answer with no change.
func TestLocalityLBDisabled(t *testing.T) {
	off, f := false, false
	top := &Topology{Services: []ServiceSpec{{Name: "s", LocalityLB: &off, Mode: "strict", Endpoints: []EndpointSpec{
		{Address: "127.0.0.1:80", Locality: Locality{"region": "a", "zone": "x", NoLocalityScope: "ignored"}},
		{Address: "127.0.0.2:80", Locality: Locality{"region": "b"}},
		{Address: "127.0.0.3:80", Locality: Locality{"region": "c"}, Healthy: &f},
	}}}}
	tree, err := Build(top, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc := tree.Services()[0]
	if len(svc.scopes) != 1 || svc.scopes[0] != NoLocalityScope {
		t.Fatalf("scopes %v, want [%s]", svc.scopes, NoLocalityScope)
	}
	for _, src := range []Locality{{}, {"region": "a", "zone": "x"}, {"region": "zz"}} {
		if r := svc.Lookup(src); r.Len() != 2 {
			t.Fatalf("source %v: %d candidates, want both eligible endpoints", src, r.Len())
		}
	}
	top.Services[0].Mode = ""
	top.Services[0].Spillover = &SpilloverSpec{}
	tree, err = Build(top, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l := tree.Services()[0].Loads(Locality{"region": "a"}); l.N != 1 || l.Counts[0] != (PriorityCounts{Healthy: 2, Total: 3}) || l.Healthy[0] != 100 {
		t.Fatalf("loads %+v, want one priority of 2 healthy of 3", l)
	}
}

func TestLocalityLBDisabledValidation(t *testing.T) {
	off := false
	cases := []struct {
		name, want string
		spec       ServiceSpec
	}{
		{"scopes", "scopes have no effect with locality_lb: false", ServiceSpec{Name: "s", LocalityLB: &off, Scopes: []string{"zone"}}},
		{"failover", "failover needs locality load balancing", ServiceSpec{Name: "s", LocalityLB: &off, Spillover: &SpilloverSpec{}, Failover: []FailoverSpec{{From: "a", To: "b"}}}},
		{"reserved scope", "is reserved", ServiceSpec{Name: "s", Scopes: []string{NoLocalityScope}}},
		{"override without label", `scope "=x": an override is label=value`, ServiceSpec{Name: "s", Scopes: []string{"=x"}}},
		{"override with two =", `scope "a=b=c"`, ServiceSpec{Name: "s", Scopes: []string{"a=b=c"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Build(&Topology{Services: []ServiceSpec{c.spec}}, BuildOptions{})
			if !errors.Is(err, ErrInvalidTopology) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want ErrInvalidTopology mentioning %q", err, c.want)
			}
		})
	}
}
