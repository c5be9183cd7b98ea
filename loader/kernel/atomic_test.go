package kernel

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	bpftest "github.com/loctree/loctree/bpf/tests"
	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// atomicPool are the backends generations draw from; all of them listen, so
// a connection sent to a wrong endpoint is seen, not refused.
func atomicPool() []string {
	var out []string
	for i := range 12 {
		out = append(out, fmt.Sprintf("127.0.8.%d:9008", i+1))
	}
	return out
}

// generationTopology moves the pool's endpoints between zones and changes
// their number every generation, so the tree's shape and every range move.
func generationTopology(rng *rand.Rand, weight uint32) *shared.Topology {
	pool := atomicPool()
	rng.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
	spec := shared.ServiceSpec{Name: "flip", VIP: "127.77.0.9:80", Scopes: []string{"region", "zone"}}
	for i, a := range pool[:2+rng.IntN(len(pool)-1)] {
		zone := fmt.Sprintf("z%d", rng.IntN(4))
		if i == 0 {
			zone = "z1" // the source's zone always has a candidate
		}
		e := ep(a, "r1", zone)
		e.Weight = &weight
		spec.Endpoints = append(spec.Endpoints, e)
	}
	return &shared.Topology{Services: []shared.ServiceSpec{spec}}
}

// TestAtomicUpdates: thousands of connections while the tree is replaced
// hundreds of times; every connection reaches an endpoint that is a
// candidate in a generation installed during the connect, and none fails.
func TestAtomicUpdates(t *testing.T) {
	kerneltest.RequireRoot(t)
	kerneltest.Backends(t, atomicPool())
	src := shared.Locality{"region": "r1", "zone": "z1"}
	rng := rand.New(rand.NewPCG(8, 9))
	const generations = 300
	cands := make([][]string, generations+2)
	trees := make([]*shared.Tree, generations+2)
	for g := 1; g <= generations+1; g++ {
		tree, err := shared.Build(generationTopology(rng, 1), shared.BuildOptions{Generation: uint64(g)})
		if err != nil {
			t.Fatal(err)
		}
		svc, _ := tree.Service("flip")
		trees[g], cands[g] = tree, candidates(tree, svc, src)
	}
	in := setup(t, trees[1], src)
	var applied atomic.Int64
	applied.Store(1)
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		for g := 2; g <= generations; g++ {
			if _, err := in.Apply(trees[g]); err != nil {
				t.Error(err)
				return
			}
			applied.Store(int64(g))
			time.Sleep(3 * time.Millisecond) // let connections run between updates
		}
	})
	var conns atomic.Int64
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				lo := applied.Load()
				got, err := kerneltest.Ask("127.77.0.9:80")
				hi := applied.Load() + 1 // an Apply may be in flight
				if err != nil {
					t.Errorf("connect during generations %d..%d: %v", lo, hi, err)
					return
				}
				if !validIn(cands[lo:hi+1], got) {
					t.Errorf("connect during generations %d..%d reached %s, candidates %v", lo, hi, got, cands[lo:hi+1])
					return
				}
				conns.Add(1)
			}
		})
	}
	wg.Wait()
	t.Logf("%d connections across %d generations", conns.Load(), generations)
	if conns.Load() < 1000 {
		t.Fatalf("only %d connections ran during the updates", conns.Load())
	}
}

func validIn(sets [][]string, got string) bool {
	return slices.ContainsFunc(sets, func(s []string) bool { return slices.Contains(s, got) })
}

// TestAtomicUpdatesKernelLoop hammers the service with lookups inside the
// kernel (bpf_loop in the test-only program, millions of them) while the
// loader replaces the tree hundreds of times. Every endpoint of generation
// g has weight g, so a lookup that mixes a service value with nodes or
// endpoints of another generation is counted as torn. None may be.
func TestAtomicUpdatesKernelLoop(t *testing.T) {
	kerneltest.RequireRoot(t)
	src := shared.Locality{"region": "r1", "zone": "z1"}
	rng := rand.New(rand.NewPCG(10, 11))
	const generations = 300
	trees := make([]*shared.Tree, generations+1)
	for g := 1; g <= generations; g++ {
		trees[g] = mustBuild(t, generationTopology(rng, uint32(g)), uint64(g))
	}
	in, err := Open(Config{Locality: src})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if _, err := in.Apply(trees[1]); err != nil {
		t.Fatal(err)
	}
	kl := newKernelLookup(t, in)
	svc, _ := trees[1].Service("flip")
	args := bpftest.NewArgs(FrontendOf(svc.VIP()), sourceLabels(svc, src), 20000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for g := 2; g <= generations; g++ {
			if _, err := in.Apply(trees[g]); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		if _, err := kl.objs.LtTestHammer.Run(&ebpf.RunOptions{Context: args}); err != nil {
			t.Fatal(err)
		}
	}
	var out bpftest.HammerOut
	if err := kl.objs.LtTestHammerRes.Lookup(uint32(0), &out); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d kernel lookups during %d updates: %d torn, %d without candidate", out.Runs, generations-1, out.Torn, out.Missing)
	if out.Torn != 0 || out.Missing != 0 || out.Runs < 100000 {
		t.Fatalf("%d lookups: %d torn, %d missing", out.Runs, out.Torn, out.Missing)
	}
}
