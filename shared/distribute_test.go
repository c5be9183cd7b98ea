package shared

import (
	"bytes"
	"errors"
	"maps"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/loctree/loctree/shared/wire"
)

func distributeService(mut func(s *ServiceSpec)) *Topology {
	s := ServiceSpec{Name: "a", Spillover: &SpilloverSpec{},
		Distribute: []DistributeSpec{{From: "r1/*", To: map[string]uint32{"r1/z1": 80, "r2": 20}}},
		Endpoints:  []EndpointSpec{{Address: "127.0.0.1:80", Locality: Locality{"region": "r1", "zone": "z1"}}}}
	mut(&s)
	return &Topology{Services: []ServiceSpec{s}}
}

// TestBuildValidatesDistribute: Istio's ValidateLocalityLbSetting rules
// (pkg/config/validation/agent/validation.go at 86c9f01f: weights 1..100
// summing to 100, no overlapping localities, one trailing "*", not with
// failover) and what the tree needs (spillover, locality scopes first).
func TestBuildValidatesDistribute(t *testing.T) {
	to := func(m map[string]uint32) func(s *ServiceSpec) {
		return func(s *ServiceSpec) { s.Distribute[0].To = m }
	}
	cases := []struct {
		name, want string
		mut        func(s *ServiceSpec)
	}{
		{"no spillover", "distribute needs spillover", func(s *ServiceSpec) { s.Spillover = nil }},
		{"with failover", "distribute and failover exclude each other", func(s *ServiceSpec) {
			s.Failover = []FailoverSpec{{From: "r1", To: "r2"}}
		}},
		{"locality off", "distribute needs locality load balancing", func(s *ServiceSpec) {
			f := false
			s.LocalityLB = &f
		}},
		{"weight sum", "to weights sum to 90 (want 100)", to(map[string]uint32{"r1": 70, "r2": 20})},
		{"weight zero", `to "r2": weight 0 (want 1 to 100)`, to(map[string]uint32{"r1": 100, "r2": 0})},
		{"weight over 100", "weight 101", to(map[string]uint32{"r1": 101})},
		{"no targets", "0 to localities", to(nil)},
		{"too many targets", "9 to localities (want 1 to 8)", to(map[string]uint32{"a": 10, "b": 10, "c": 10, "d": 10, "e": 10, "f": 10, "g": 10, "h": 30, "i": 0})},
		{"overlapping targets", `to "r1/z1" overlaps to "r1"`, to(map[string]uint32{"r1": 50, "r1/z1": 50})},
		{"star overlaps all", `overlaps`, to(map[string]uint32{"*": 50, "r2": 50})},
		{"star not last", `"*" may only be the whole last segment`, to(map[string]uint32{"r1/*/s1": 100})},
		{"two stars", `"*" may only be the whole last segment`, to(map[string]uint32{"r1/*/*": 100})},
		{"partial star", `"*" may only be the whole last segment`, to(map[string]uint32{"r1/z*": 100})},
		{"empty segment", "empty segment", to(map[string]uint32{"r1//s1": 100})},
		{"four segments", "4 segments", to(map[string]uint32{"r/z/s/x": 100})},
		{"empty from", "empty locality pattern", func(s *ServiceSpec) { s.Distribute[0].From = "" }},
		{"overlapping from", `rule 2 from "r1/z2" overlaps`, func(s *ServiceSpec) {
			s.Distribute = append(s.Distribute, DistributeSpec{From: "r1/z2", To: map[string]uint32{"r1": 100}})
		}},
		{"scopes without zone", "patterns name region/zone, so the scopes must start with [region zone] (they are [region])", func(s *ServiceSpec) {
			s.Scopes = []string{"region"}
		}},
		{"scopes not region first", "must start with [region zone] (they are [network region zone])", func(s *ServiceSpec) {
			s.Scopes = []string{"network", "region", "zone"}
		}},
		{"control", "control character", to(map[string]uint32{"r\x1b": 100})},
		{"too many rules", "256 distribute rules (limit 255)", func(s *ServiceSpec) { s.Distribute = make([]DistributeSpec, 256) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Build(distributeService(c.mut), BuildOptions{})
			if !errors.Is(err, ErrInvalidTopology) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want ErrInvalidTopology mentioning %q", err, c.want)
			}
		})
	}
	if _, err := Build(distributeService(func(*ServiceSpec) {}), BuildOptions{}); err != nil {
		t.Fatalf("a valid rule: %v", err)
	}
}

// TestDistributeEncoding pins, from docs/FORMAT.md, where distribute rules
// go: their count in policy byte 25, then in the metadata after the
// failover pairs, per rule its from (u16 length + bytes), one byte of
// target count, and per target (sorted by pattern) the pattern and one
// weight byte; and that they decode back.
func TestDistributeEncoding(t *testing.T) {
	rules := []DistributeSpec{
		{From: "r1/*", To: map[string]uint32{"r2": 20, "r1/z1": 80}},
		{From: "r2", To: map[string]uint32{"r2/z9/s1": 100}},
	}
	tree, err := Build(distributeService(func(s *ServiceSpec) { s.Distribute = rules }), BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := tree.Bytes()
	pols := int(le.Uint32(b[wire.HEndpointsOff:])) + wire.EndpointRecordSize
	if b[pols+24] != 0 || b[pols+25] != 2 || !bytes.Equal(b[pols+26:pols+32], make([]byte, 6)) {
		t.Fatalf("policy bytes 24..31 are %x, want 00 02 then zeros", b[pols+24:pols+32])
	}
	wantTail := []byte{4, 0, 'r', '1', '/', '*', 2, 5, 0, 'r', '1', '/', 'z', '1', 80, 2, 0, 'r', '2', 20,
		2, 0, 'r', '2', 1, 8, 0, 'r', '2', '/', 'z', '9', '/', 's', '1', 100}
	if !bytes.HasSuffix(b, wantTail) {
		t.Fatalf("metadata ends %x, want %x", b[len(b)-len(wantTail):], wantTail)
	}
	got := tree.Services()[0].distribute
	if len(got) != 2 || got[0].From != "r1/*" || !maps.Equal(got[0].To, rules[0].To) || !maps.Equal(got[1].To, rules[1].To) {
		t.Fatalf("decoded distribute %+v", got)
	}
}

// TestDecodeRejectsBadDistribute: a blob whose distribute rules Build would
// refuse is corrupt, with the reason (the checksum is recomputed, so only
// the rule check can catch it).
func TestDecodeRejectsBadDistribute(t *testing.T) {
	tree, err := Build(distributeService(func(*ServiceSpec) {}), BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	weight80 := bytes.LastIndexByte(tree.Bytes(), 80)
	for _, c := range []struct {
		name, want string
		mut        func(b []byte)
	}{
		{"weights", "to weights sum to 99", func(b []byte) { b[weight80] = 79 }},
		{"reserved byte 27", "reserved policy bytes", func(b []byte) { b[int(le.Uint32(b[wire.HEndpointsOff:]))+wire.EndpointRecordSize+27] = 1 }},
		{"min_rank with distribute", "min_rank 1", func(b []byte) { b[int(le.Uint32(b[wire.HEndpointsOff:]))+wire.EndpointRecordSize+24] = 1 }},
		{"count", "metadata", func(b []byte) { b[int(le.Uint32(b[wire.HEndpointsOff:]))+wire.EndpointRecordSize+25] = 2 }},
	} {
		b := bytes.Clone(tree.Bytes())
		c.mut(b)
		le.PutUint32(b[wire.HChecksum:], checksum(b))
		if _, err := Decode(b); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrCorrupt mentioning %q", c.name, err, c.want)
		}
	}
}

// TestPickLoadsFollowsTargetShares: picks by the loads of a service with
// distribute rules land only on the endpoints of the rule's targets
// (healthy or degraded ones unless in panic), and each target gets its
// TargetShare (chi-square per case at p ≈ 3e-6, so 300 cases stay
// reliable), for every policy (random only in panic, where the share is by
// endpoint count).
func TestPickLoadsFollowsTargetShares(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	const picks = 4000
	for it := range 300 {
		top, _, _ := randomDistributeTopology(rng, it%2 == 0)
		top.Services[0].Policy = policyNames[rng.IntN(len(policyNames))]
		tree, err := Build(top, BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		svc := tree.Services()[0]
		l := svc.Loads(randomSource3(rng))
		if l.N == 0 {
			continue
		}
		p := NewPicker(tree, PickerOptions{Seed: uint64(it + 1)})
		counts := make([]int, l.NTargets)
		for range picks {
			ep, ok := p.PickLoads(svc, &l, rng.Uint64())
			if !ok && l.Counts[0].Healthy+l.Counts[0].Degraded == 0 && !l.InPanic(0) {
				break // Envoy's "no host": the load is on P0's healthy endpoints, and it has none
			}
			if !ok {
				t.Fatalf("case %d: no pick with loads %+v", it, l.Targets[:l.NTargets])
			}
			i := targetHolding(&l, ep)
			if i < 0 || (!l.InPanic(0) && ep >= svc.lay.EpFirst+svc.lay.EpEligible+svc.lay.EpDegraded) {
				t.Fatalf("case %d: picked endpoint %d outside the targets' eligible endpoints", it, ep)
			}
			if r, ok := l.TargetRange(ep); !ok || r.Lo != l.dist[i].span[setEligible].Lo || r.Hi != l.dist[i].span[setEligible].Hi {
				t.Fatalf("case %d: TargetRange(%d) = %+v, %v; want target %d's eligible span %+v", it, ep, r, ok, i, l.dist[i].span[setEligible])
			}
			counts[i]++
		}
		if (l.InPanic(0) && svc.policy != PolicyRandom) || (!l.InPanic(0) && l.Counts[0].Healthy+l.Counts[0].Degraded == 0) {
			continue
		}
		var c []int
		var shares []float64
		for i := range l.NTargets {
			if s := l.TargetShare(i); s > 0 {
				c, shares = append(c, counts[i]), append(shares, s)
			} else if counts[i] > 0 {
				t.Fatalf("case %d: %d picks of target %q, whose share is 0", it, counts[i], l.Targets[i].Pattern)
			}
		}
		if df := len(c) - 1; df > 0 {
			if chi2 := pickerChiSquare(c, shares); chi2 > chi2AtZ(df, 4.5) {
				t.Fatalf("case %d (%s): picks per target %v, shares %v: chi-square %.1f (df %d)", it, svc.policy, c, shares, chi2, df)
			}
		}
	}
}

// targetHolding is the target whose spans (any set) hold ep, or -1.
func targetHolding(l *Loads, ep uint32) int {
	for i := range l.NTargets {
		for _, sp := range l.dist[i].span {
			if ep >= sp.Lo && ep < sp.Hi {
				return i
			}
		}
	}
	return -1
}

// chi2AtZ is the chi-square quantile at the normal quantile z
// (Wilson–Hilferty).
func chi2AtZ(df int, z float64) float64 {
	k := float64(df)
	a := 2 / (9 * k)
	return k * math.Pow(1-a+z*math.Sqrt(a), 3)
}

// TestPickLoadsDistributeDoesNotAllocate: loads and pick of a service with
// distribute rules allocate nothing, for every policy.
func TestPickLoadsDistributeDoesNotAllocate(t *testing.T) {
	tree, svc, srcs := distributeTree(t, 1000)
	p := NewPicker(tree, PickerOptions{})
	res := testing.Benchmark(func(b *testing.B) {
		var l Loads
		for i := 0; b.Loop(); i++ {
			svc.policy = Policy(i % len(policyNames))
			svc.LoadsSource(srcs[i%len(srcs)], &l)
			p.PickLoads(svc, &l, uint64(i))
		}
	})
	if a := res.AllocsPerOp(); a != 0 {
		t.Fatalf("%d allocations per loads and pick", a)
	}
}

// TestDecodeSurvivesDistributeDamage: random bytes written over the policy
// records and the strings of a tree with distribute rules (checksum
// resealed, so only the decoder's checks stand) never panic: the blob is
// ErrCorrupt, or it decodes and every source's loads stay inside the
// service and can be picked from.
func TestDecodeSurvivesDistributeDamage(t *testing.T) {
	tree, err := Build(distributeService(func(s *ServiceSpec) {
		s.Distribute = append(s.Distribute, DistributeSpec{From: "r2", To: map[string]uint32{"r2/z1/s1": 40, "r1": 60}})
	}), BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	orig := tree.Bytes()
	pols := int(le.Uint32(orig[wire.HEndpointsOff:])) + wire.EndpointRecordSize*int(le.Uint32(orig[wire.HEndpointCnt:]))
	rng := rand.New(rand.NewPCG(71, 72))
	decoded := 0
	for range 20000 {
		b := bytes.Clone(orig)
		for range 1 + rng.IntN(3) {
			b[pols+rng.IntN(len(b)-pols)] = byte(rng.IntN(256))
		}
		got, err := Decode(reseal(b))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			continue
		}
		decoded++
		lookupEverywhere(t, got)
		for _, src := range []Locality{{"region": "r1", "zone": "z1"}, {"region": "r2", "zone": "z1", "subzone": "s1"}} {
			checkLoads(t, got.Services()[0], got.Services()[0].Loads(src))
		}
	}
	if decoded == 0 {
		t.Fatal("no damaged blob decoded: the test checks nothing past the decoder")
	}
}
