package kernel

import (
	"fmt"
	"runtime"
	"testing"

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
