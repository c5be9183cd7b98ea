package loader

import (
	"io"
	"maps"
	"net/netip"
	"testing"

	"github.com/loctree/loctree/loader/kernel"
	"github.com/loctree/loctree/shared"
)

// trafficTree is service api (VIP 127.77.0.1:80, weighted) over zones z1
// (.1, weight 1; .4 unhealthy, weight 10), z2 (.2, weight 3) of region r1
// and z3 (.3, weight 4) of r2. a moves .1 to zone z2.
func trafficTree(t *testing.T, moved bool) *shared.Tree {
	t.Helper()
	w := func(n uint32) *uint32 { return &n }
	no := false
	zone1 := "z1"
	if moved {
		zone1 = "z2"
	}
	top := &shared.Topology{Services: []shared.ServiceSpec{{Name: "api", VIP: "127.77.0.1:80", Scopes: []string{"region", "zone"}, Policy: "weighted",
		Endpoints: []shared.EndpointSpec{
			{Address: "127.0.0.1:80", Locality: shared.Locality{"region": "r1", "zone": zone1}, Weight: w(1)},
			{Address: "127.0.0.2:80", Locality: shared.Locality{"region": "r1", "zone": "z2"}, Weight: w(3)},
			{Address: "127.0.0.3:80", Locality: shared.Locality{"region": "r2", "zone": "z3"}, Weight: w(4)},
			{Address: "127.0.0.4:80", Locality: shared.Locality{"region": "r1", "zone": "z1"}, Weight: w(10), Healthy: &no},
		}}}}
	tree, err := shared.Build(top, shared.BuildOptions{Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

var (
	apiVIP = netip.MustParseAddrPort("127.77.0.1:80")
	nodeZ1 = shared.Locality{"region": "r1", "zone": "z1"}
	podZ2  = shared.Locality{"region": "r1", "zone": "z2"}
)

func tc(src shared.Locality, cgroup uint64, fe netip.AddrPort, b string, n uint64) kernel.TrafficCount {
	return kernel.TrafficCount{Source: src, Cgroup: cgroup, Frontend: fe, Backend: netip.MustParseAddrPort(b), TrafficTotals: kernel.TrafficTotals{Picks: n}}
}

// withBytes is c with its closed connections' bytes sent and received.
func withBytes(c kernel.TrafficCount, sent, received uint64) kernel.TrafficCount {
	c.Sent, c.Received = sent, received
	return c
}

// trafficCounts are the kernel's counts of the golden file: the node
// (r1/z1) sent 90 picks to .1 (9,000 bytes sent, 45,000 received) and 10
// to .2 (1,000, 5,000); a pod cgroup (r1/z2) 40 to .2 (400, 800); a cgroup
// this agent did not set 5 to .3 (50, 0); the node 3 to a VIP the tree no
// longer has (no bytes: still open); 2 picks (20, 30) found the map full.
func trafficCounts() ([]kernel.TrafficCount, kernel.TrafficTotals, error) {
	return []kernel.TrafficCount{
		withBytes(tc(nodeZ1, 0, apiVIP, "127.0.0.1:80", 90), 9000, 45000),
		withBytes(tc(nodeZ1, 0, apiVIP, "127.0.0.2:80", 10), 1000, 5000),
		withBytes(tc(podZ2, 7, apiVIP, "127.0.0.2:80", 40), 400, 800),
		withBytes(tc(nil, 9, apiVIP, "127.0.0.3:80", 5), 50, 0),
		tc(nodeZ1, 0, netip.MustParseAddrPort("127.77.0.9:80"), "127.0.0.9:80", 3),
	}, kernel.TrafficTotals{Picks: 2, Sent: 20, Received: 30}, nil
}

// matrixOf is one matrix of a tally: of's value by pair.
func matrixOf(tl *trafficTally, of func(kernel.TrafficTotals) uint64) map[[2]string]uint64 {
	out := map[[2]string]uint64{}
	for pair, n := range tl.pairs {
		out[pair] = of(n)
	}
	return out
}

func picksOf(n kernel.TrafficTotals) uint64    { return n.Picks }
func sentOf(n kernel.TrafficTotals) uint64     { return n.Sent }
func receivedOf(n kernel.TrafficTotals) uint64 { return n.Received }

// TestTrafficTally checks the tally of trafficCounts against numbers
// worked by hand from trafficTree's spec:
//   - pairs: z1→z1 90, z1→z2 10, z2→z2 40, (unknown)→z3 5 (the source's
//     locality is not known), z1→(unknown) 3 (no such service), (other) 2;
//     the bytes sent and received add up the same way (no count shares a
//     pair with another);
//   - depth: .1 shares region and zone with r1/z1 (2: 90), .2 the region
//     (1: 10), .2 both with r1/z2 (2: 40); 10 unknown;
//   - placed 140 (90+10+40), cross 10;
//   - no locality: the eligible weights are 1 (z1), 3 (z2), 4 (z3) of 8
//     (.4 is unhealthy): from z1 7/8 cross, from z2 5/8, so 100·7/8 +
//     40·5/8 = 112.5.
//
// Then .1 moves to z2 and its count grows by 10: the 10 count as z1→z2,
// the 90 stay z1→z1. Then only the bytes of .2's closed connections grow
// (by 500 sent, 700 received): they count as z1→z2 bytes, and the
// connection counts (pairs, depths, placed) do not move.
func TestTrafficTally(t *testing.T) {
	tl := newTrafficTally("")
	counts, other, _ := trafficCounts()
	tl.update(trafficTree(t, false), counts, other)
	wantPairs := map[[2]string]uint64{{"z1", "z1"}: 90, {"z1", "z2"}: 10, {"z2", "z2"}: 40, {"(unknown)", "z3"}: 5, {"z1", "(unknown)"}: 3, {"(other)", "(other)"}: 2}
	wantSent := map[[2]string]uint64{{"z1", "z1"}: 9000, {"z1", "z2"}: 1000, {"z2", "z2"}: 400, {"(unknown)", "z3"}: 50, {"z1", "(unknown)"}: 0, {"(other)", "(other)"}: 20}
	wantReceived := map[[2]string]uint64{{"z1", "z1"}: 45000, {"z1", "z2"}: 5000, {"z2", "z2"}: 800, {"(unknown)", "z3"}: 0, {"z1", "(unknown)"}: 0, {"(other)", "(other)"}: 30}
	wantDepths := map[string]uint64{"2": 130, "1": 10, "(unknown)": 10}
	check := func() {
		t.Helper()
		if got := matrixOf(tl, picksOf); !maps.Equal(got, wantPairs) || !maps.Equal(tl.depths, wantDepths) {
			t.Fatalf("pairs %v depths %v, want %v %v", got, tl.depths, wantPairs, wantDepths)
		}
		if s, r := matrixOf(tl, sentOf), matrixOf(tl, receivedOf); !maps.Equal(s, wantSent) || !maps.Equal(r, wantReceived) {
			t.Fatalf("bytes sent %v received %v, want %v %v", s, r, wantSent, wantReceived)
		}
	}
	check()
	if tl.placed != 140 || tl.cross != 10 || tl.nolocality != 112.5 {
		t.Fatalf("placed %d cross %d no-locality %v, want 140 10 112.5", tl.placed, tl.cross, tl.nolocality)
	}
	counts[0].Picks = 100
	tl.update(trafficTree(t, true), counts, other)
	wantPairs[[2]string{"z1", "z2"}] += 10
	wantDepths["1"] += 10
	check()
	tl.update(trafficTree(t, true), counts, other) // nothing new: nothing counted
	check()
	counts[1].Sent += 500
	counts[1].Received += 700
	tl.update(trafficTree(t, true), counts, other)
	wantSent[[2]string{"z1", "z2"}] += 500
	wantReceived[[2]string{"z1", "z2"}] += 700
	check()
	if tl.placed != 150 || tl.cross != 20 {
		t.Fatalf("placed %d cross %d after bytes only, want 150 20 (connections unchanged)", tl.placed, tl.cross)
	}
}

// TestTrafficPairsCapped: past maxPairs pairs, new pairs count under
// (other); pairs that have a series keep it, and no pick is lost.
func TestTrafficPairsCapped(t *testing.T) {
	tl := newTrafficTally("")
	tl.maxPairs = 2
	tree := trafficTree(t, false)
	tl.update(tree, []kernel.TrafficCount{tc(nodeZ1, 0, apiVIP, "127.0.0.1:80", 1), tc(nodeZ1, 0, apiVIP, "127.0.0.2:80", 2)}, kernel.TrafficTotals{})
	tl.update(tree, []kernel.TrafficCount{tc(nodeZ1, 0, apiVIP, "127.0.0.1:80", 5), tc(nodeZ1, 0, apiVIP, "127.0.0.2:80", 2), withBytes(tc(nodeZ1, 0, apiVIP, "127.0.0.3:80", 4), 40, 400)}, kernel.TrafficTotals{})
	want := map[[2]string]uint64{{"z1", "z1"}: 5, {"z1", "z2"}: 2, {"(other)", "(other)"}: 4}
	if got := matrixOf(tl, picksOf); !maps.Equal(got, want) {
		t.Fatalf("pairs %v, want %v", got, want)
	}
	// The bytes of a pair past the cap count under (other) too.
	if o := tl.pairs[[2]string{"(other)", "(other)"}]; o.Sent != 40 || o.Received != 400 {
		t.Fatalf("(other) bytes sent %d received %d, want 40 400", o.Sent, o.Received)
	}
}

// TestTrafficPlacedBeforeInstall: the picks made before a new tree is
// installed are placed with the tree they were made with: the agent reads
// the counts before it switches trees, not only when scraped. Counts from
// before the first tree (an earlier agent's) wait for it.
func TestTrafficPlacedBeforeInstall(t *testing.T) {
	m := newMetrics("")
	picks := uint64(10)
	m.traffic = func() ([]kernel.TrafficCount, kernel.TrafficTotals, error) {
		return []kernel.TrafficCount{tc(nodeZ1, 0, apiVIP, "127.0.0.1:80", picks)}, kernel.TrafficTotals{}, nil
	}
	m.installed(trafficTree(t, false), kernel.Result{})
	picks = 30
	m.installed(trafficTree(t, true), kernel.Result{}) // .1 moves to z2
	picks = 35
	if _, err := m.WriteTo(io.Discard); err != nil {
		t.Fatal(err)
	}
	want := map[[2]string]uint64{{"z1", "z1"}: 30, {"z1", "z2"}: 5}
	if got := matrixOf(m.tally, picksOf); !maps.Equal(got, want) {
		t.Fatalf("pairs %v, want %v", got, want)
	}
}

// TestTrafficStaleForgotten: a count whose endpoint the installed tree no
// longer has and that did not grow since the last read is handed to the
// kernel to delete and forgotten (endpoints that come and go would fill
// the kernel's map until every new key counted as (other)); one that is
// still in the tree, or grew, is kept. A forgotten key that comes back
// counts from zero, so no pick is lost or counted twice.
func TestTrafficStaleForgotten(t *testing.T) {
	m := newMetrics("")
	gone := tc(nodeZ1, 0, apiVIP, "127.0.0.9:80", 4) // not an endpoint of trafficTree
	live := tc(nodeZ1, 0, apiVIP, "127.0.0.1:80", 6)
	counts := []kernel.TrafficCount{gone, live}
	m.traffic = func() ([]kernel.TrafficCount, kernel.TrafficTotals, error) {
		return counts, kernel.TrafficTotals{}, nil
	}
	var deleted []kernel.TrafficCount
	m.forgetTraffic = func(c []kernel.TrafficCount) (int, error) {
		deleted = append(deleted, c...)
		counts = counts[1:] // the kernel no longer has it
		return len(c), nil
	}
	m.installed(trafficTree(t, false), kernel.Result{}) // no tree yet: not read
	m.readTraffic()                                     // first seen: counted, not stale
	if len(deleted) != 0 {
		t.Fatalf("deleted %v at the first read, want nothing (its picks were just counted)", deleted)
	}
	m.readTraffic() // no growth, not in the tree: stale
	if len(deleted) != 1 || deleted[0].Backend != gone.Backend {
		t.Fatalf("deleted %v, want only %s", deleted, gone.Backend)
	}
	m.readTraffic()
	if len(deleted) != 1 {
		t.Fatalf("deleted %v; a live endpoint's count must stay", deleted)
	}
	counts = append(counts, tc(nodeZ1, 0, apiVIP, "127.0.0.8:80", 1)) // another gone endpoint
	m.readTraffic()                                                   // first seen
	counts[len(counts)-1].Sent = 100                                  // its connection closed
	m.readTraffic()
	if len(deleted) != 1 {
		t.Fatalf("deleted %v; a count whose bytes grew must stay", deleted)
	}
	counts = counts[:len(counts)-1]
	counts = append(counts, tc(nodeZ1, 0, apiVIP, "127.0.0.9:80", 2)) // picked again from zero
	m.readTraffic()
	want := map[[2]string]uint64{{"z1", "z1"}: 6, {"z1", "(unknown)"}: 7}
	if got := matrixOf(m.tally, picksOf); !maps.Equal(got, want) {
		t.Fatalf("pairs %v, want %v", got, want)
	}
}
