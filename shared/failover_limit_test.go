package shared

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/loctree/loctree/shared/wire"
)

// boundedOracle is oracle (the ztunnel rule) with bounded failover: an
// endpoint whose rank (matching scope prefix) is below limit is no
// candidate, so a source whose best rank is below it has none; an endpoint
// on another network shares no scope prefix with the source.
func boundedOracle(spec *ServiceSpec, src Locality, limit int) []string {
	cands, depth, crossNetwork := oracle(spec, src)
	if depth < limit || (crossNetwork && limit > 0) {
		return nil
	}
	return cands
}

// withoutBelow is spec without the endpoints whose rank for src (Istio's
// matching, istioRank) is below limit: what Envoy would be given for this
// source under bounded failover.
func withoutBelow(spec *ServiceSpec, src Locality, limit int) *ServiceSpec {
	out := *spec
	out.Endpoints = slices.DeleteFunc(slices.Clone(spec.Endpoints), func(e EndpointSpec) bool {
		return istioRank(spec.Scopes, e.Locality, src) < limit
	})
	return &out
}

// limitOf picks a random failover_limit among spec's scopes (or none) and
// returns it with its rank bound.
func limitOf(rng *rand.Rand, spec *ServiceSpec) (string, int) {
	scopes := spec.Scopes
	if len(scopes) == 0 {
		scopes = DefaultScopes()
	}
	i := rng.IntN(len(scopes) + 1)
	if i == len(scopes) {
		return "", 0
	}
	return scopes[i], i + 1
}

// TestFailoverLimitLookupMatchesOracle: with failover_limit (issue 11 item
// 4, "never leave the region"), Lookup returns the ztunnel candidates when
// they match the source at least through the limit scope, and none
// otherwise, for random topologies and sources.
func TestFailoverLimitLookupMatchesOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	refused := 0
	for it := range 3000 {
		top := randomTopology(rng)
		spec := &top.Services[0]
		spec.Mode = ""
		var limit int
		spec.FailoverLimit, limit = limitOf(rng, spec)
		tree, err := Build(top, BuildOptions{Generation: uint64(it)})
		if err != nil {
			t.Fatalf("topology %d: %v", it, err)
		}
		svc := tree.Services()[0]
		for range 4 {
			src := randomSource(rng, spec.Scopes)
			want := boundedOracle(spec, src, limit)
			if got := rangeAddrs(tree, svc.Lookup(src)); !slices.Equal(got, want) {
				t.Fatalf("topology %d (limit %q), source %v: lookup %v, oracle %v", it, spec.FailoverLimit, src, got, want)
			}
			if want == nil {
				refused++
			}
		}
	}
	if refused < 500 {
		t.Fatalf("only %d sources had no candidate: the limit is hardly exercised", refused)
	}
}

// TestFailoverLimitLoadsMatchOracle: with failover_limit and spillover, the
// priorities are those Envoy's oracle computes from the endpoints within
// the limit only (ranks below it are no priority), for random topologies,
// healthy, degraded and unhealthy endpoints, failover rules and sources.
func TestFailoverLimitLoadsMatchOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	cut := 0
	for it := range 3000 {
		top, of, threshold := randomSpilloverTopology(rng)
		spec := &top.Services[0]
		var limit int
		spec.FailoverLimit, limit = limitOf(rng, spec)
		tree, err := Build(top, BuildOptions{Generation: uint64(it)})
		if err != nil {
			t.Fatalf("topology %d: %v", it, err)
		}
		svc := tree.Services()[0]
		for range 4 {
			src := randomSource(rng, spec.Scopes)
			want := priorityOracle(withoutBelow(spec, src, limit), src, of, threshold)
			l := svc.Loads(src)
			if err := compareLoads(tree, &l, want); err != nil {
				t.Fatalf("topology %d (limit %q), source %v: %v", it, spec.FailoverLimit, src, err)
			}
			if len(want) < len(priorityOracle(spec, src, of, threshold)) {
				cut++
			}
		}
	}
	if cut < 500 {
		t.Fatalf("only %d sources lost a priority to the limit", cut)
	}
}

// TestFailoverLimitErrors: a limit that is not one of the service's scopes,
// or that has no effect, is refused with the reason.
func TestFailoverLimitErrors(t *testing.T) {
	base := func() ServiceSpec {
		return ServiceSpec{Name: "reviews", Scopes: []string{"region", "zone"},
			Endpoints: []EndpointSpec{{Address: "127.0.0.1:80", Locality: Locality{"region": "r1"}}}}
	}
	off := false
	for _, c := range []struct {
		name string
		edit func(*ServiceSpec)
		want string
	}{
		{"typo", func(s *ServiceSpec) { s.FailoverLimit = "regoin" }, `failover_limit "regoin" is not one of the scopes [region zone]`},
		{"strict", func(s *ServiceSpec) { s.FailoverLimit = "region"; s.Mode = "strict" }, "failover_limit has no effect in mode strict"},
		{"no locality", func(s *ServiceSpec) { s.FailoverLimit = "region"; s.Scopes = nil; s.LocalityLB = &off }, "failover_limit needs locality load balancing"},
		{"distribute", func(s *ServiceSpec) {
			s.FailoverLimit, s.Spillover = "region", &SpilloverSpec{}
			s.Distribute = []DistributeSpec{{From: "r1", To: map[string]uint32{"r1": 100}}}
		}, "failover_limit and distribute exclude each other"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := base()
			c.edit(&s)
			_, err := Build(&Topology{Services: []ServiceSpec{s}}, BuildOptions{})
			if !errors.Is(err, ErrInvalidTopology) || !strings.Contains(fmtErr(err), c.want) {
				t.Fatalf("got %v, want an ErrInvalidTopology containing %q", err, c.want)
			}
		})
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestFailoverLimitEncoded: the limit is policy byte 24 (min_rank, the
// number of scopes candidates must share: index of the scope + 1), it
// survives a decode, and a decoder refuses a min_rank above the levels.
func TestFailoverLimitEncoded(t *testing.T) {
	top := &Topology{Services: []ServiceSpec{{Name: "reviews", Scopes: []string{"region", "zone", "subzone"}, FailoverLimit: "zone",
		Endpoints: []EndpointSpec{{Address: "127.0.0.1:80", Locality: Locality{"region": "r1", "zone": "z1"}}}}}}
	tree, err := Build(top, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	blob := slices.Clone(tree.Bytes())
	if v := le.Uint16(blob[wire.HVersion:]); v != FormatVersion {
		t.Fatalf("format version %d, want %d", v, FormatVersion)
	}
	pol := blob[int(le.Uint32(blob[wire.HEndpointsOff:]))+wire.EndpointRecordSize*int(le.Uint32(blob[wire.HEndpointCnt:])):]
	if pol[24] != 2 {
		t.Fatalf("policy byte 24 is %d, want 2 (region, zone)", pol[24])
	}
	if got := tree.Services()[0].minRank; got != 2 {
		t.Fatalf("decoded MinRank %d, want 2", got)
	}
	pol[24] = 4
	le.PutUint32(blob[wire.HChecksum:], checksum(blob))
	if _, err := Decode(blob); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "min_rank 4") {
		t.Fatalf("min_rank 4 of 3 levels: %v, want ErrCorrupt naming it", err)
	}
}
