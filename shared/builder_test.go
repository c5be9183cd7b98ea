package shared

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// randomService is one service of randomTopology, renamed, with a VIP.
func randomService(rng *rand.Rand, name string, vip int) ServiceSpec {
	s := randomTopology(rng).Services[0]
	s.Name = name
	if vip > 0 {
		s.VIP = fmt.Sprintf("127.77.%d.%d:80", vip/250, vip%250+1)
	}
	if rng.IntN(4) == 0 {
		s.Hosts = []string{name + ".example"}
	}
	// Format 2: priority load and degraded endpoints give the service a
	// policy record and aux trees, which the builder places too.
	if s.Mode != "strict" && rng.IntN(2) == 0 {
		s.Spillover = &SpilloverSpec{}
	}
	if rng.IntN(3) == 0 {
		s.Policy, s.SessionAffinity = "consistent_hash", &SessionAffinitySpec{TimeoutSeconds: u32p(1 + rng.Uint32N(MaxAffinityTimeout))}
	}
	for i := range s.Endpoints {
		if e := &s.Endpoints[i]; (e.Healthy == nil || *e.Healthy) && rng.IntN(5) == 0 {
			e.Degraded = true
		}
	}
	// Format 3: distribute rules lengthen the metadata the builder places.
	if s.Spillover != nil && rng.IntN(2) == 0 {
		s.Scopes = []string{"region", "zone"}
		s.Distribute = []DistributeSpec{{From: "region-1", To: map[string]uint32{"region-2": 70, "region-1/zone-3": 30}}}
	}
	if s.Mode != "strict" && len(s.Distribute) == 0 && rng.IntN(3) == 0 { // format 3: policy byte 24
		s.FailoverLimit, _ = limitOf(rng, &s)
	}
	if rng.IntN(6) == 0 { // format 4: the network rule (on by default with network first) turned off
		s.NetworkRule = NetworkRulePlain
	}
	return s
}

// mirror is the topology a Builder should hold, kept as a map.
type mirror map[string]ServiceSpec

func (m mirror) topology() *Topology {
	top := &Topology{}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}) {
		top.Services = append(top.Services, m[name])
	}
	return top
}

// TestBuilderMatchesBuild is the builder's differential test: after every
// random batch of per-service changes, the incrementally built tree is
// byte-for-byte Build's tree of the same topology, and decodes.
func TestBuilderMatchesBuild(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 1))
	var b Builder
	want := mirror{}
	for step := range 300 {
		var upserts []ServiceSpec
		var removes []string
		for range 1 + rng.IntN(3) {
			name := fmt.Sprintf("svc-%02d", rng.IntN(30))
			if slices.ContainsFunc(upserts, func(s ServiceSpec) bool { return s.Name == name }) || slices.Contains(removes, name) {
				continue
			}
			if _, ok := want[name]; ok && rng.IntN(4) == 0 {
				removes = append(removes, name)
				delete(want, name)
				continue
			}
			s := randomService(rng, name, step*4+len(upserts)+1)
			upserts = append(upserts, s)
			want[name] = s
		}
		if len(want) == 0 {
			continue
		}
		gen := uint64(step + 1)
		got, err := b.Update(upserts, removes, gen)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		full, err := Build(want.topology(), BuildOptions{Generation: gen})
		if err != nil {
			t.Fatalf("step %d: Build: %v", step, err)
		}
		if !bytes.Equal(got.Bytes(), full.Bytes()) {
			t.Fatalf("step %d: incremental tree differs from Build's", step)
		}
		checkSameTree(t, got, full)
	}
	stamped, err := b.Stamp(999)
	full, _ := Build(want.topology(), BuildOptions{Generation: 999})
	if err != nil || !bytes.Equal(stamped.Bytes(), full.Bytes()) || b.Tree() != stamped {
		t.Fatalf("Stamp: %v, or its tree differs from Build's", err)
	}
	if _, err := new(Builder).Stamp(1); err == nil {
		t.Fatal("Stamp of an empty builder: no error")
	}
}

// checkSameTree compares what a reader of the two trees sees.
func checkSameTree(t *testing.T, got, want *Tree) {
	t.Helper()
	if _, err := Decode(slices.Clone(got.Bytes())); err != nil {
		t.Fatalf("incremental tree does not decode: %v", err)
	}
	if got.NumServices() != want.NumServices() {
		t.Fatalf("%d services, want %d", got.NumServices(), want.NumServices())
	}
	for i := range want.Services() {
		g, w := got.Services()[i], want.Services()[i]
		if g.index != i || g.name != w.name || g.lay.Root != w.lay.Root || g.lay.EpFirst != w.lay.EpFirst || g.vip != w.vip ||
			!slices.Equal(g.hosts, w.hosts) || !slices.Equal(g.scopes, w.scopes) || !slices.Equal(g.values, w.values) || g.Tree() != got ||
			g.lay.AuxRoot != w.lay.AuxRoot || g.lay.AuxCount != w.lay.AuxCount || g.lay.EpDegraded != w.lay.EpDegraded ||
			g.overprovision != w.overprovision || g.panicThreshold != w.panicThreshold ||
			g.affinityTimeout != w.affinityTimeout || g.networkRule != w.networkRule || g.lay.NetRoot != w.lay.NetRoot || g.lay.NetCount != w.lay.NetCount {
			t.Fatalf("service %d: %+v, want %+v", i, g, w)
		}
		for _, n := range append([]string{w.name}, w.hosts...) {
			if s, ok := got.Service(n); !ok || s.index != i {
				t.Fatalf("Service(%q) = %v, %v", n, s, ok)
			}
		}
		checkSameDistribute(t, g, w)
	}
}

// checkSameDistribute: the two services give the same distribute loads
// (their targets' absolute spans too) to sources each rule applies to.
func checkSameDistribute(t *testing.T, g, w *Service) {
	t.Helper()
	for _, src := range []Locality{{"region": "region-1"}, {"region": "region-2", "zone": "zone-3"}, {}} {
		gl, wl := g.Loads(src), w.Loads(src)
		if gl.tree != g.Tree() || gl.N != wl.N || gl.Rule != wl.Rule || gl.NTargets != wl.NTargets || gl.Healthy != wl.Healthy ||
			!slices.Equal(gl.Targets[:gl.NTargets], wl.Targets[:wl.NTargets]) || !slices.Equal(gl.dist[:gl.NTargets], wl.dist[:wl.NTargets]) {
			t.Fatalf("service %s from %v: loads %+v, want %+v", g.name, src, gl.dist[:gl.NTargets], wl.dist[:wl.NTargets])
		}
	}
}

// zoneEndpoint is an endpoint at addr in zone.
func zoneEndpoint(addr, zone string) EndpointSpec {
	return EndpointSpec{Address: addr, Locality: Locality{"zone": zone}}
}

// abServices are two services: a (with a host) and b.
func abServices() (a, b ServiceSpec) {
	a = ServiceSpec{Name: "a", VIP: "127.77.0.1:80", Hosts: []string{"a.x"}, Endpoints: []EndpointSpec{zoneEndpoint("127.0.0.1:1", "z1")}}
	b = ServiceSpec{Name: "b", VIP: "127.77.0.2:80", Endpoints: []EndpointSpec{zoneEndpoint("127.0.0.2:1", "z2")}}
	return a, b
}

// TestBuilderRejectsAndKeeps: a bad change is an error naming the service,
// and the builder keeps its previous tree and state.
func TestBuilderRejectsAndKeeps(t *testing.T) {
	a, b := abServices()
	var bld Builder
	first, err := bld.Update([]ServiceSpec{a, b}, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		upserts []ServiceSpec
		removes []string
		want    string
	}{
		{"same vip", []ServiceSpec{{Name: "c", VIP: "127.77.0.1:80"}}, nil, `same vip`},
		{"host taken", []ServiceSpec{{Name: "c", Hosts: []string{"a.x"}}}, nil, `host "a.x" is already used`},
		{"name is a host", []ServiceSpec{{Name: "a.x"}}, nil, `"a.x" is already used`},
		{"twice in one update", []ServiceSpec{{Name: "c"}, {Name: "c"}}, nil, `"c" is already used`},
		{"bad endpoint", []ServiceSpec{{Name: "b", Endpoints: []EndpointSpec{{Address: "nowhere"}}}}, nil, `service "b"`},
		{"unknown removal", nil, []string{"zz"}, `remove "zz": no such service`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := bld.Update(c.upserts, c.removes, 2)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one mentioning %q", err, c.want)
			}
			if bld.Tree() != first {
				t.Fatal("a rejected update replaced the tree")
			}
		})
	}
	// A collision with another service's label is detected across services.
	bld.labels[Label("z9")] = labelUse{value: "other", refs: 1}
	_, err = bld.Update([]ServiceSpec{{Name: "c", Endpoints: []EndpointSpec{zoneEndpoint("127.0.0.3:1", "z9")}}}, nil, 2)
	if !errors.Is(err, ErrLabelCollision) {
		t.Fatalf("error %v, want a label collision", err)
	}
	delete(bld.labels, Label("z9"))
	// The state is intact: moving a's VIP and host to a new service works
	// only together with a's removal, and gives Build's tree.
	c := a
	c.Name = "c"
	got, err := bld.Update([]ServiceSpec{c}, []string{"a"}, 3)
	if err != nil {
		t.Fatal(err)
	}
	full, _ := Build(&Topology{Services: []ServiceSpec{b, c}}, BuildOptions{Generation: 3})
	if !bytes.Equal(got.Bytes(), full.Bytes()) {
		t.Fatal("tree after rejected updates differs from Build's")
	}
	// Revert undoes the last update.
	bld.Revert()
	if bld.Tree() != first {
		t.Fatal("Revert did not restore the previous tree")
	}
	again, err := bld.Update([]ServiceSpec{c}, []string{"a"}, 3)
	if err != nil || !bytes.Equal(again.Bytes(), full.Bytes()) {
		t.Fatalf("update after Revert: %v", err)
	}
	// After Commit there is nothing to revert.
	bld.Commit()
	bld.Revert()
	if bld.Tree() != again {
		t.Fatal("Revert after Commit changed the tree")
	}
	// Every service removed: an empty tree, as Build makes of no services
	// (a Kubernetes source before any Service opts in).
	empty, err := bld.Update(nil, []string{"b", "c"}, 4)
	fullEmpty, _ := Build(&Topology{}, BuildOptions{Generation: 4})
	if err != nil || !bytes.Equal(empty.Bytes(), fullEmpty.Bytes()) || empty.NumServices() != 0 {
		t.Fatalf("empty tree: %v", err)
	}
}

// TestBuilderCheck: Check refuses what Update would refuse for one service
// (its own errors; a name, host, VIP or label another service holds;
// replacing a service may take its own names), accepts the rest, and
// changes nothing either way.
func TestBuilderCheck(t *testing.T) {
	a, b := abServices()
	var bld Builder
	first, err := bld.Update([]ServiceSpec{a, b}, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	moved := a
	moved.Endpoints = []EndpointSpec{zoneEndpoint("127.0.0.9:1", "z9")}
	strict := b
	strict.Mode, strict.Spillover = "strict", &SpilloverSpec{}
	cases := []struct {
		spec ServiceSpec
		want string // "" accepted
	}{
		{moved, ""},
		{ServiceSpec{Name: "c", VIP: "127.77.0.3:80", Endpoints: []EndpointSpec{zoneEndpoint("127.0.0.3:1", "z1")}}, ""},
		{ServiceSpec{Name: "c", VIP: "127.77.0.1:80"}, "same vip"},
		{ServiceSpec{Name: "c", Hosts: []string{"a.x"}}, `host "a.x" is already used`},
		{ServiceSpec{Name: "b", Endpoints: []EndpointSpec{{Address: "nowhere"}}}, `service "b"`},
		{strict, "spillover needs mode failover"},
	}
	for _, c := range cases {
		err := bld.Check(&c.spec)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("Check(%s): %v, want accepted", c.spec.Name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("Check(%s): %v, want an error mentioning %q", c.spec.Name, err, c.want)
		case c.want != "" && !errors.Is(err, ErrInvalidTopology):
			t.Errorf("Check(%s): %v does not wrap ErrInvalidTopology", c.spec.Name, err)
		}
	}
	if bld.Tree() != first {
		t.Fatal("Check replaced the tree")
	}
	got, err := bld.Update([]ServiceSpec{moved}, nil, 2)
	want, _ := Build(&Topology{Services: []ServiceSpec{moved, b}}, BuildOptions{Generation: 2})
	if err != nil || !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("update after the checks: %v, or a tree other than Build's", err)
	}
}

// scaleServices is the issue-15 mesh: services × perService endpoints over
// regions/zones/subzones that grow with the size, as real meshes do.
func scaleServices(services, perService int, salt int) []ServiceSpec {
	out := make([]ServiceSpec, services)
	for s := range out {
		out[s] = scaleService(fmt.Sprintf("svc-%05d", s), s, perService, salt)
	}
	return out
}

func scaleService(name string, s, n, salt int) ServiceSpec {
	spec := ServiceSpec{Name: name, VIP: fmt.Sprintf("127.77.%d.%d:80", s/250, s%250+1), Endpoints: make([]EndpointSpec, n)}
	for i := range spec.Endpoints {
		k := s*n + i + salt
		spec.Endpoints[i] = EndpointSpec{
			Address:  fmt.Sprintf("127.%d.%d.%d:%d", 1+k>>16&0x7f, k>>8&0xff, k&0xff, 8000+salt%1000),
			Locality: Locality{"region": fmt.Sprintf("r%d", i%6), "zone": fmt.Sprintf("z%d", i%18), "subzone": fmt.Sprintf("s%d", i%(n/10+1))},
		}
	}
	return spec
}

// BenchmarkBuilderUpdate changes one 1,000-endpoint service in a mesh of
// S 100-endpoint services plus that one, next to a full Build of the same
// topology (the agent's cost per change before the Builder).
func BenchmarkBuilderUpdate(b *testing.B) {
	for _, services := range []int{100, 1000} {
		top := &Topology{Services: append(scaleServices(services, 100, 0), scaleService("big", services, 1000, 0))}
		alt := [2]ServiceSpec{scaleService("big", services, 1000, 0), scaleService("big", services, 1000, 7)}
		var bld Builder
		if _, err := bld.Update(top.Services, nil, 1); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("S=%d/update", services), func(b *testing.B) {
			i := 0
			for b.Loop() {
				i++
				if _, err := bld.Update(alt[i%2:i%2+1], nil, uint64(i+1)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("S=%d/build", services), func(b *testing.B) {
			for b.Loop() {
				if _, err := Build(top, BuildOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
