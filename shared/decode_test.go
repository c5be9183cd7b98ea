package shared

import (
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/loctree/loctree/shared/wire"
)

func goldenTree(t testing.TB) *Tree {
	t.Helper()
	tree, err := Build(loadJSON(t, "testdata/mesh.json"), BuildOptions{Generation: 42})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// spilloverTree is the golden mesh with spillover on every failover
// service and some degraded endpoints: all sections of format 2 are used.
func spilloverTree(t testing.TB) *Tree {
	t.Helper()
	top := loadJSON(t, "testdata/mesh.json")
	for i := range top.Services {
		s := &top.Services[i]
		if s.Mode == "" || s.Mode == "failover" {
			s.Spillover = &SpilloverSpec{}
			if len(s.Scopes) == 0 || slices.Contains(s.Scopes, "region") {
				s.Failover = []FailoverSpec{{From: "us-east", To: "eu-central"}, {From: "eu-central", To: "us-west"}}
			}
		}
		for k := range s.Endpoints {
			if e := &s.Endpoints[k]; k%2 == 1 && (e.Healthy == nil || *e.Healthy) {
				e.Degraded = true
			}
		}
	}
	tree, err := Build(top, BuildOptions{Generation: 43})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

func reseal(b []byte) []byte {
	binary.LittleEndian.PutUint32(b[wire.HChecksum:], checksum(b))
	return b
}

func TestDecodeRoundTrip(t *testing.T) {
	tree := goldenTree(t)
	got, err := Decode(append([]byte(nil), tree.Bytes()...))
	if err != nil {
		t.Fatal(err)
	}
	if got.Generation() != 42 || got.NumServices() != 3 || got.NumEndpoints() != 7 {
		t.Fatalf("generation %d, %d services, %d endpoints", got.Generation(), got.NumServices(), got.NumEndpoints())
	}
	s, ok := got.Service("reviews")
	if !ok || s.name != "reviews.default.svc.cluster.local" || s.vip.String() != "127.77.0.11:9080" {
		t.Fatalf("reviews: %+v", s)
	}
	if s.lay.EpTotal != 5 || s.lay.EpEligible != 4 || s.mode != ModeFailover || s.policy != PolicyRandom {
		t.Fatalf("reviews: %+v", s)
	}
	p, _ := got.Service("payments.default.svc.cluster.local")
	if p.mode != ModeStrict || p.policy != PolicyWeighted || p.health != HealthAllowAll || p.lay.EpEligible != 2 || p.vip.IsValid() {
		t.Fatalf("payments: %+v", p)
	}
	if _, ok := got.Service("nope"); ok {
		t.Fatal("unknown service found")
	}
}

func TestDecodeRejectsTruncation(t *testing.T) {
	b := goldenTree(t).Bytes()
	for n := 0; n < len(b); n++ {
		if _, err := Decode(b[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: error %v, want ErrCorrupt", n, err)
		}
	}
	if _, err := Decode(append(append([]byte(nil), b...), 0)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("one trailing byte: %v", err)
	}
}

// TestDecodeRejectsFlips flips every bit of the blob. With the checksum left
// alone every flip must be caught by it; with the checksum recomputed, the
// structural checks must either reject the blob or accept one whose lookups
// stay in range (a flipped weight or address is still a valid tree).
func TestDecodeRejectsFlips(t *testing.T) {
	for _, tree := range []*Tree{goldenTree(t), spilloverTree(t)} {
		decodeRejectsFlips(t, tree.Bytes())
	}
}

func decodeRejectsFlips(t *testing.T, orig []byte) {
	for i := range orig {
		for bit := range 8 {
			b := append([]byte(nil), orig...)
			b[i] ^= 1 << bit
			if _, err := Decode(b); !errors.Is(err, ErrCorrupt) && i >= wire.HFlags {
				t.Fatalf("flip byte %d bit %d: checksum not checked (%v)", i, bit, err)
			}
			tree, err := Decode(reseal(b))
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("flip %d/%d: error does not wrap ErrCorrupt: %v", i, bit, err)
				}
				continue
			}
			lookupEverywhere(t, tree)
		}
	}
}

func lookupEverywhere(t testing.TB, tree *Tree) {
	for _, s := range tree.Services() {
		for _, src := range []Locality{{}, {"region": "us-east", "zone": "us-east-1a", "subzone": "rack-1"}, {"region": "eu-central", "zone": "eu-central-1a"}} {
			r := s.Lookup(src)
			if r.Hi > uint32(tree.NumEndpoints()) || !withinCandidates(s, r) {
				t.Fatalf("%s: range [%d, %d) outside the service's eligible endpoints", s.name, r.Lo, r.Hi)
			}
			for k := r.Lo; k < r.Hi; k++ {
				_ = tree.Endpoint(k)
			}
			checkLoads(t, s, s.Loads(src))
		}
	}
}

// withinCandidates: r lies in s's eligible endpoints, or in the network
// rule's copies of them when the network tree answered.
func withinCandidates(s *Service, r Range) bool {
	lo, hi := s.lay.EpFirst, s.lay.EpFirst+s.lay.EpEligible
	if s.CrossNetwork(r) {
		lo, hi = s.lay.EpFirst+s.lay.EpTotal, s.lay.EpFirst+s.lay.EpTotal+s.lay.EpEligible
	}
	return r.Lo <= r.Hi && r.Lo >= lo && r.Hi <= hi && (!s.CrossNetwork(r) || s.networkRule)
}

// checkLoads checks that a decoded tree's priority loads stay inside the
// service's endpoints, sum to 100 and can be picked from.
func checkLoads(t testing.TB, s *Service, l Loads) {
	t.Helper()
	sum := 0
	for p := range l.N {
		sum += int(l.Healthy[p]) + int(l.Degraded[p])
		lo, hi := s.lay.EpFirst, s.lay.EpFirst+s.lay.EpTotal
		if l.Other(p) { // the network rule's copies
			lo, hi = hi, hi+s.netCopies()
		}
		for _, sp := range l.allSpans(p) {
			if sp.Lo > sp.Hi || (sp.Lo < sp.Hi && (sp.Lo < lo || sp.Hi > hi)) {
				t.Fatalf("%s: priority %d span [%d, %d) outside the service's endpoints", s.name, p, sp.Lo, sp.Hi)
			}
		}
	}
	for i := range l.NTargets {
		for _, sp := range l.dist[i].span {
			if sp.Lo > sp.Hi || (sp.Lo < sp.Hi && (sp.Lo < s.lay.EpFirst || sp.Hi > s.lay.EpFirst+s.lay.EpTotal)) {
				t.Fatalf("%s: target %d span [%d, %d) outside the service's endpoints", s.name, i, sp.Lo, sp.Hi)
			}
		}
	}
	if l.N > 0 && sum != 100 && sum != 0 { // 0: Envoy's no-load corner (choosePriority falls back to P0)
		t.Fatalf("%s: loads sum to %d: %+v", s.name, sum, l)
	}
	if l.N > 0 {
		NewPicker(s.Tree(), PickerOptions{Seed: 1}).PickLoads(s, &l, 7)
	}
}

func TestDecodeErrorsNameTheProblem(t *testing.T) {
	orig := goldenTree(t).Bytes()
	mut := func(f func(b []byte)) []byte {
		b := append([]byte(nil), orig...)
		f(b)
		return reseal(b)
	}
	reviews, _ := goldenTree(t).Service("reviews")
	rootOff := int(binary.LittleEndian.Uint32(orig[wire.HNodesOff:])) + int(reviews.lay.Root)*wire.NodeRecordSize
	cases := []struct {
		name, want string
		blob       []byte
	}{
		{"magic", "bad magic", mut(func(b []byte) { b[0] = 'X' })},
		{"version", "format version 1", mut(func(b []byte) { b[wire.HVersion] = 1 })},
		{"checksum", "checksum", func() []byte { b := append([]byte(nil), orig...); b[len(b)-1]++; return b }()},
		{"levels", "levels", mut(func(b []byte) { b[wire.HeaderSize+wire.SLevels] = 9 })},
		{"policy", "policy 9", mut(func(b []byte) { b[wire.HeaderSize+wire.SPolicy] = 9 })},
		{"load band", "load band low 2, high 2", mut(func(b []byte) { b[wire.HeaderSize+wire.SLoadHigh], b[wire.HeaderSize+wire.SLoadLow] = 2, 2 })},
		{"load band low 0", "load band low 0, high 2", mut(func(b []byte) { b[wire.HeaderSize+wire.SLoadHigh] = 2 })},
		{"load band strict", "load band on a strict", mut(func(b []byte) {
			b[wire.HeaderSize+wire.SMode], b[wire.HeaderSize+wire.SLoadHigh], b[wire.HeaderSize+wire.SLoadLow] = byte(ModeStrict), 2, 1
		})},
		{"reserved after the band", "reserved service bytes", mut(func(b []byte) { b[wire.HeaderSize+wire.SReserved] = 1 })},
		{"child order", "label order", mut(func(b []byte) {
			// swap the labels of the first two children of reviews' root
			c := b[rootOff+wire.NodeRecordSize:]
			var tmp [8]byte
			copy(tmp[:], c[:8])
			copy(c[:8], c[wire.NodeRecordSize:wire.NodeRecordSize+8])
			copy(c[wire.NodeRecordSize:], tmp[:])
		})},
		{"child pointer", "children", mut(func(b []byte) {
			binary.LittleEndian.PutUint32(b[rootOff+wire.NFirstChild:], uint32(reviews.lay.Root)+2)
		})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(c.blob)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want ErrCorrupt mentioning %q", err, c.want)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(goldenTree(f).Bytes())
	f.Add(spilloverTree(f).Bytes())
	if tree, err := Build(distributeService(func(*ServiceSpec) {}), BuildOptions{}); err == nil {
		f.Add(tree.Bytes())
	}
	if tree, err := Build(networkTopology(""), BuildOptions{}); err == nil {
		f.Add(tree.Bytes()) // the network rule: copies and a network tree
	}
	if tree, err := Build(issue26NetworkTopology(), BuildOptions{}); err == nil {
		f.Add(tree.Bytes()) // the network rule with spillover: the other-network tree
	}
	f.Add([]byte("LTRE"))
	f.Fuzz(func(t *testing.T, b []byte) {
		tree, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		lookupEverywhere(t, tree)
	})
}

// FuzzLookup decodes a resealed mutation of a valid blob (so the fuzzer gets
// past the checksum) and looks up fuzzed sources in every service.
func FuzzLookup(f *testing.F) {
	f.Add(goldenTree(f).Bytes(), "us-east", "us-east-1a", "rack-1")
	f.Add(goldenTree(f).Bytes(), "", "", "")
	f.Add(spilloverTree(f).Bytes(), "us-east", "us-east-1a", "rack-1")
	if tree, err := Build(networkTopology(""), BuildOptions{}); err == nil {
		f.Add(tree.Bytes(), "us-east", "", "") // no network: the network tree answers
	}
	if tree, err := Build(issue26NetworkTopology(), BuildOptions{}); err == nil {
		f.Add(tree.Bytes(), "r1", "z2", "s1") // no network: otherNetwork's copies
	}
	f.Fuzz(func(t *testing.T, in []byte, region, zone, subzone string) {
		b := slices.Clone(in) // testing.F: the fuzzer's input must not be modified
		if len(b) >= wire.HeaderSize {
			reseal(b)
		}
		tree, err := Decode(b)
		if err != nil {
			return
		}
		src := Locality{"region": region, "zone": zone, "subzone": subzone}
		for _, s := range tree.Services() {
			r := s.Lookup(src)
			if !withinCandidates(s, r) || r.Depth > len(s.scopes) {
				t.Fatalf("%s: range [%d, %d) depth %d out of bounds", s.name, r.Lo, r.Hi, r.Depth)
			}
			if r.Len() > 0 && s.mode == ModeStrict && r.Depth != len(s.scopes) {
				t.Fatalf("%s: strict range at depth %d", s.name, r.Depth)
			}
			checkLoads(t, s, s.Loads(src))
		}
	})
}

// TestDecodeRejectsBadPolicy: the checks of format 2's policy record and aux
// trees name what is wrong.
func TestDecodeRejectsBadPolicy(t *testing.T) {
	orig := spilloverTree(t).Bytes()
	pols := int(binary.LittleEndian.Uint32(orig[wire.HEndpointsOff:])) + wire.EndpointRecordSize*int(binary.LittleEndian.Uint32(orig[wire.HEndpointCnt:]))
	nSvc := int(binary.LittleEndian.Uint32(orig[wire.HServiceCount:]))
	aux := pols + nSvc*wire.PolicyRecordSize
	cases := []struct {
		name, want string
		mut        func(b []byte)
	}{
		{"reserved", "reserved policy bytes", func(b []byte) { b[pols+wire.PReserved] = 1 }},
		{"panic", "panic threshold 101", func(b []byte) { b[pols+wire.PPanic] = 101 }},
		{"aux root", "aux trees", func(b []byte) { binary.LittleEndian.PutUint32(b[pols+wire.PDegradedRoot:], 1) }},
		{"degraded count", "degraded endpoints", func(b []byte) { binary.LittleEndian.PutUint32(b[pols+wire.PEpDegraded:], 1000) }},
		{"aux range", "degraded tree: corrupt tree: root node", func(b []byte) { binary.LittleEndian.PutUint32(b[aux+wire.NHi:], 999) }},
		{"aux count", "aux nodes", func(b []byte) { binary.LittleEndian.PutUint32(b[wire.HAuxNodeCount:], 1<<26) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := slices.Clone(orig)
			c.mut(b)
			_, err := Decode(reseal(b))
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want ErrCorrupt mentioning %q", err, c.want)
			}
		})
	}
}

func TestDecodeRejectsBadFailover(t *testing.T) {
	tree := spilloverTree(t)
	var svc *Service
	for i := range tree.Services() {
		if s := tree.Services()[i]; len(s.failover) > 0 {
			svc = s
		}
	}
	if svc == nil {
		t.Fatal("no failover service in the spillover tree")
	}
	orig := tree.Bytes()
	pols := int(binary.LittleEndian.Uint32(orig[wire.HEndpointsOff:])) + wire.EndpointRecordSize*tree.NumEndpoints()
	b := slices.Clone(orig)
	b[pols+svc.index*wire.PolicyRecordSize+wire.PFailoverCount]++ // one rule more than the metadata holds
	if _, err := Decode(reseal(b)); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "metadata") {
		t.Fatalf("error %v, want ErrCorrupt about the metadata", err)
	}
}
