package kernel

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	bpftest "github.com/loctree/loctree/bpf/tests"
	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// reuseTopology is three services whose sizes and zones change every
// generation, so Apply moves their regions and first-fit hands a region
// one service left to another. Every endpoint of service i has port
// 9200+i: a pick with another port is another service's endpoint.
func reuseTopology(rng *rand.Rand) *shared.Topology {
	top := &shared.Topology{}
	for i := range 3 {
		spec := shared.ServiceSpec{Name: fmt.Sprintf("s%d", i), VIP: fmt.Sprintf("127.77.1.%d:80", i+1), Scopes: []string{"region", "zone"}}
		for j := range 1 + rng.IntN(6) {
			spec.Endpoints = append(spec.Endpoints, ep(fmt.Sprintf("127.0.20.%d:%d", j+1, 9200+i), "r1", fmt.Sprintf("z%d", rng.IntN(3))))
		}
		top.Services = append(top.Services, spec)
	}
	return top
}

// TestRegionReuseWaitsForReaders: a connect that copied a service's value
// may still walk that copy's regions after the loader has published a new
// one (the hooks run under RCU, preemptible). thousands of back-to-back
// Applies move three services' regions while an in-kernel reader holds one
// copy across 20,000 walks per run; a pick in another service's endpoints
// fails the test. The same run without the grace period must see such
// picks, or the test proves nothing.
func TestRegionReuseWaitsForReaders(t *testing.T) {
	kerneltest.RequireRoot(t)
	t.Run("grace period", func(t *testing.T) {
		out := staleWalks(t, true, func(applies int, _ bpftest.StaleOut) bool { return applies >= 2000 })
		if out.Foreign != 0 || out.Refused != 0 {
			t.Fatalf("%d walks of stale copies: %d picked another service's endpoint, %d refused", out.Runs, out.Foreign, out.Refused)
		}
	})
	t.Run("no grace period", func(t *testing.T) {
		deadline := time.Now().Add(20 * time.Second)
		out := staleWalks(t, false, func(_ int, out bpftest.StaleOut) bool { return out.Foreign > 0 || time.Now().After(deadline) })
		if out.Foreign == 0 {
			t.Fatalf("%d walks of stale copies without a grace period, none picked another service's endpoint: the test cannot see region reuse", out.Runs)
		}
	})
}

// staleWalks applies trees back to back, with or without the grace period,
// while the kernel walks stale copies, until enough says so.
func staleWalks(t *testing.T, grace bool, enough func(applies int, out bpftest.StaleOut) bool) bpftest.StaleOut {
	in, err := Open(Config{Locality: shared.Locality{"region": "r1", "zone": "z1"}, Capacity: Capacity{Services: 8, Nodes: 256, Endpoints: 256}})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if !grace {
		in.grace.setSync(func() error { return nil })
	}
	rng := rand.New(rand.NewPCG(21, 22))
	trees := make([]*shared.Tree, 64)
	for g := range trees {
		trees[g] = mustBuild(t, reuseTopology(rng), uint64(g+1))
	}
	if _, err := in.Apply(trees[0]); err != nil {
		t.Fatal(err)
	}
	kl := newKernelLookup(t, in)
	var applies atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := in.Apply(trees[i%len(trees)]); err != nil {
				t.Error(err)
				return
			}
			applies.Add(1)
		}
	})
	var out bpftest.StaleOut
	for i := 0; !enough(int(applies.Load()), out); i++ {
		kl.staleRun(t, trees[0], i%3)
		if err := kl.objs.LtTestStaleRes.Lookup(uint32(0), &out); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d applies, %d walks of stale copies: %d foreign, %d refused", applies.Load(), out.Runs, out.Foreign, out.Refused)
	return out
}

// staleRun walks service s%d 20,000 times with one copy of its value.
func (kl *kernelLookup) staleRun(t *testing.T, tree *shared.Tree, i int) {
	t.Helper()
	svc, _ := tree.Service(fmt.Sprintf("s%d", i))
	in := bpftest.NewStaleIn(FrontendOf(svc.VIP()), uint16(9200+i), sourceLabels(svc, shared.Locality{"region": "r1", "zone": "z1"}), 20000)
	if err := kl.objs.LtTestStaleArgs.Put(uint32(0), &in); err != nil {
		t.Fatal(err)
	}
	if _, err := kl.objs.LtTestStale.Run(&ebpf.RunOptions{Data: make([]byte, 14)}); err != nil {
		t.Fatalf("run stale walk: %v", err)
	}
}
