package kernel

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// onOneCPU keeps the test's goroutine on its thread and the thread on one
// CPU until the test ends, so every connect runs its program on the CPU
// whose lt_loads_cache entries (per CPU) the earlier connects filled.
func onOneCPU(t *testing.T) {
	t.Helper()
	runtime.LockOSThread()
	var old, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		t.Fatal(err)
	}
	cpu := -1
	for i := 0; i < 1024 && cpu < 0; i++ {
		if old.IsSet(i) {
			cpu = i
		}
	}
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unix.SchedSetaffinity(0, &old)
		runtime.UnlockOSThread()
	})
}

// askAllTo connects to vip n times and fails unless every connect reaches want.
func askAllTo(t *testing.T, vip, want string, n int, when string) {
	t.Helper()
	if seen := askN(t, vip, n); seen[want] != n {
		t.Fatalf("%s: %d connects reached %v, want all at %s", when, n, seen, want)
	}
}

// cacheService is a spillover service (factor 140) with one endpoint in
// r1/z1 and one in r2/z2, the first healthy unless down.
func cacheService(down bool) shared.ServiceSpec {
	c := spillService("cached", "127.77.46.1:80", nil, []loadsEndpoint{
		{"127.0.46.1:9146", "r1", "z1", "", 0}, {"127.0.46.2:9146", "r2", "z2", "", 0}})
	if down {
		c.spec.Endpoints[0].Healthy = boolp(false)
	}
	return c.spec
}

// TestLoadsCacheFollowsUpdates: a spillover connect takes the priority
// loads this CPU last computed for the frontend (lt_loads_cache) only
// while the service value is the one they were computed from. From r1/z1
// every connect goes to r1/z1's endpoint (priority 0 healthy: load 100,
// Envoy's recalculatePerPriorityState); after an update marks it
// unhealthy, priority 0 has no health and priority 1 (r2) takes the whole
// load, so every connect goes to r2's, the first one after the update too.
func TestLoadsCacheFollowsUpdates(t *testing.T) {
	kerneltest.RequireRoot(t)
	top := &shared.Topology{Services: []shared.ServiceSpec{cacheService(false)}}
	_, in := install(t, top, shared.Locality{"region": "r1", "zone": "z1"})
	onOneCPU(t)
	askAllTo(t, "127.77.46.1:80", "127.0.46.1:9146", 20, "healthy")
	cachedFor(t, in, 1)
	down := &shared.Topology{Services: []shared.ServiceSpec{cacheService(true)}}
	if _, err := in.Apply(mustBuild(t, down, 2)); err != nil {
		t.Fatal(err)
	}
	askAllTo(t, "127.77.46.1:80", "127.0.46.2:9146", 20, "r1/z1 unhealthy")
	cachedFor(t, in, 2)
}

// cachedFor fails unless lt_loads_cache holds, on some CPU, valid loads of
// the one service computed from the service value of tree generation gen:
// the connects keep what they computed.
func cachedFor(t *testing.T, in *Installer, gen uint64) {
	t.Helper()
	var slot uint32
	var perCPU []bpf.LoadsCached
	var got []string
	it := in.k.objs.LtLoadsCache.Iterate()
	for it.Next(&slot, &perCPU) {
		for cpu, c := range perCPU {
			if c.Valid == 1 && c.Svc.Generation == gen {
				return
			}
			if c.Valid != 0 || c.Svc.Generation != 0 {
				got = append(got, fmt.Sprintf("slot %d cpu %d: valid %d generation %d", slot, cpu, c.Valid, c.Svc.Generation))
			}
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	t.Fatalf("lt_loads_cache has no valid loads of generation %d: %v", gen, got)
}

// TestLoadsCacheFollowsCgroupLocality: the cached loads are those of the
// source labels they were computed for. The same service value, asked
// from the node's locality r1/z1 (r1/z1's endpoint takes the whole load),
// then from a cgroup given r2/z2 (r2/z2's does), then again from the
// node's after the cgroup's locality is cleared.
func TestLoadsCacheFollowsCgroupLocality(t *testing.T) {
	kerneltest.RequireRoot(t)
	top := &shared.Topology{Services: []shared.ServiceSpec{cacheService(false)}}
	kerneltest.Backends(t, backendsOf(top))
	in, cg := setupWith(t, mustBuild(t, top, 1), Config{Locality: shared.Locality{"region": "r1", "zone": "z1"}})
	onOneCPU(t)
	askAllTo(t, "127.77.46.1:80", "127.0.46.1:9146", 20, "node r1/z1")
	if err := in.SetCgroupLocality(cg, shared.Locality{"region": "r2", "zone": "z2"}); err != nil {
		t.Fatal(err)
	}
	askAllTo(t, "127.77.46.1:80", "127.0.46.2:9146", 20, "cgroup r2/z2")
	if err := in.ClearCgroupLocality(cg); err != nil {
		t.Fatal(err)
	}
	askAllTo(t, "127.77.46.1:80", "127.0.46.1:9146", 20, "cgroup cleared")
}

// weightedService is a spillover service with a failover rule (istiod
// then turns locality weighting on) whose source subzone r1/z1/s1 has no
// endpoint: priority 1, r1/z1, takes the whole load, one endpoint in s2
// of weight w2 and one in s3 of weight w3, each locality's effective
// weight its endpoint's (Envoy's effectiveLocalityWeight, one healthy host
// of one: weight · min(1, 1.4)).
func weightedService(w2, w3 uint32) shared.ServiceSpec {
	of, threshold := uint32(140), uint32(50)
	ep := func(addr, sub string, w uint32) shared.EndpointSpec {
		return shared.EndpointSpec{Address: addr, Weight: &w,
			Locality: shared.Locality{"region": "r1", "zone": "z1", "subzone": sub}}
	}
	return shared.ServiceSpec{Name: "weighted", VIP: "127.77.46.2:80", Failover: []shared.FailoverSpec{{From: "r1", To: "r2"}},
		Spillover: &shared.SpilloverSpec{OverprovisioningFactor: &of, PanicThreshold: &threshold},
		Endpoints: []shared.EndpointSpec{ep("127.0.46.3:9146", "s2", w2), ep("127.0.46.4:9146", "s3", w3)}}
}

// TestLoadsCacheLocalityWeightsFollowUpdates: the locality draw takes the
// runs of localities this CPU last found for the same spans of the same
// locality records (lt_loc_memo) only while the service value is the one
// they were found in. s2 and s3 weigh 1 and 99 and the connects find the
// runs (weight 100); an update to 5 and 5 is published, unasked, and once
// its grace period has freed the first value's regions (grace.go) an
// update to 9 and 1 takes them again (first fit): the same spans of
// records in the same places, of weight 10 (a draw over the old 100 would
// mostly fall past the records: refused). Most connects (99 % and 90 %
// expected, at least 60 of 100 asked) go to the heavier endpoint.
func TestLoadsCacheLocalityWeightsFollowUpdates(t *testing.T) {
	kerneltest.RequireRoot(t)
	const vip = "127.77.46.2:80"
	top := func(w2, w3 uint32) *shared.Topology {
		return &shared.Topology{Services: []shared.ServiceSpec{weightedService(w2, w3)}}
	}
	_, in := install(t, top(1, 99), shared.Locality{"region": "r1", "zone": "z1", "subzone": "s1"})
	onOneCPU(t)
	if seen := askN(t, vip, 100); seen["127.0.46.4:9146"] < 60 {
		t.Fatalf("weights 1, 99: %v, want most at s3's 127.0.46.4:9146", seen)
	}
	first := frontendValue(t, in, vip)
	for gen, w := range [][2]uint32{{5, 5}, {9, 1}} {
		time.Sleep(100 * time.Millisecond) // a grace period ends (about 8 ms)
		if _, err := in.Apply(mustBuild(t, top(w[0], w[1]), uint64(gen+2))); err != nil {
			t.Fatal(err)
		}
	}
	if now := frontendValue(t, in, vip); now.Loc != first.Loc || now.EpBase != first.EpBase {
		t.Fatalf("the third value's localities at %d, endpoints at %d, not the first's (%d, %d): the test needs them in the same places",
			now.Loc, now.EpBase, first.Loc, first.EpBase)
	}
	if seen := askN(t, vip, 100); seen["127.0.46.3:9146"] < 60 {
		t.Fatalf("weights 9, 1: %v, want most at s2's 127.0.46.3:9146", seen)
	}
}

// frontendValue is the service value published for vip.
func frontendValue(t *testing.T, in *Installer, vip string) bpf.Service {
	t.Helper()
	var svc bpf.Service
	if err := in.k.objs.LtFrontends.Lookup(FrontendOf(netip.MustParseAddrPort(vip)), &svc); err != nil {
		t.Fatal(err)
	}
	return svc
}
