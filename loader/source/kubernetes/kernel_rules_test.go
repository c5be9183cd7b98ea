package kubernetes

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/loader"
)

// TestKernelRandomRules: random worlds as in TestRandomRulesMatchIstio, the
// real agent (loader.Run) on node n0 installing them into the kernel;
// connects to each Service port's VIP land on a ready endpoint of a
// priority Envoy's priority load gives traffic under Istio's transcribed
// functions for a proxy on n0 (istioFirstReady; every ready endpoint with
// locality load balancing off). Services with failover rules are left out
// (their split is checked by TestConnectLoadsFrequencies in loader).
func TestKernelRandomRules(t *testing.T) {
	kerneltest.RequireRoot(t)
	rounds, nServices := 4, 12
	checked := 0
	for round := range rounds {
		rng := rand.New(rand.NewPCG(uint64(100+round), 12))
		w := newRandomWorld(rng, nServices)
		t.Run(fmt.Sprint(round), func(t *testing.T) { checked += w.kernelRound(t, round) }) // its own cgroup and bpffs
	}
	if checked < rounds*nServices/3 {
		t.Errorf("only %d service ports checked", checked)
	}
	t.Logf("%d service ports checked through the kernel", checked)
}

func (w *randomWorld) kernelRound(t *testing.T, round int) int {
	core, rules := w.objects()
	src, err := New(Config{Client: newClient(core...), Istio: newIstio(rules...), Mesh: w.meshConfig(t), NodeName: "n0", ClusterID: "c1",
		Debounce: 5 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for i, s := range w.services {
		for j := range s.endpoints {
			for _, port := range []int{1080, 1081} {
				addrs = append(addrs, fmt.Sprintf("127.1.%d.%d:%d", i, j+1, port))
			}
		}
	}
	stop := listenAll(t, addrs)
	defer stop()
	listen := kerneltest.FreeAddr(t)
	RunAgent(t, loader.AgentConfig{Source: src, Cgroup: kerneltest.Cgroup(t), BPFFS: kerneltest.BPFFS(t), Listen: listen})
	awaitServices(t, listen, 2*len(w.services), 30*time.Second)
	checked := 0
	for i := range w.services {
		for _, port := range []uint32{80, 81} {
			want, ok := w.istioFirstReady(i, port)
			if !ok {
				continue
			}
			checked++
			vip := fmt.Sprintf("127.77.%d.1:%d", i, port)
			for range 4 {
				got, err := kerneltest.Ask(vip)
				if len(want) == 0 {
					if err == nil {
						t.Errorf("round %d, %s: reached %q, want no endpoint", round, vip, got)
					}
					continue
				}
				if err != nil || !slices.Contains(want, got) {
					t.Errorf("round %d, %s: reached %q (%v), want one of %v\n  rules %v", round, vip, got, err, want, w.rulesOf(w.services[i].ns))
				}
			}
		}
	}
	return checked
}

// istioFirstReady are the ready endpoints (address:target port) of the
// priorities that get traffic from a proxy on n0, false where the agent
// does not claim Istio's semantics or failover rules apply. Envoy's
// priority load (load_balancer_impl.cc recalculatePerPriorityState, factor
// 140; docs/FORMAT.md "Priority load") gives priority p traffic when it has
// a ready endpoint and the availability of the priorities before it,
// min(100, 1.4·ready/total) each, adds up to less than the total
// availability (capped at 100). Panic never applies here: the mapping sets
// the threshold to 0 unless minHealthPercent > 0, and then unready
// endpoints are left out, so every priority is fully available.
func (w *randomWorld) istioFirstReady(i int, port uint32) ([]string, bool) {
	s := w.services[i]
	td := oGetTrafficDistribution(s.spec, s.svcAnn, s.nsAnn)
	drs := oDestinationRule(w.rules, s.ns, svcName(s.ns)+"."+s.ns+".svc.cluster.local", s.ns, rootNs)
	if len(drs) == 0 {
		return nil, false
	}
	pp := oPortPolicy(oTopPolicy(drs), port)
	if td != 0 && (pp == nil || !pp.lbSet || pp.lb == nil) {
		return nil, false
	}
	set, force := oEffective(w.oMesh(), pp, td)
	if set != nil && len(set.failover) > 0 {
		return nil, false
	}
	var eps []oEndpoint
	var addrs []string
	var ready []bool
	for j, e := range s.endpoints {
		eps = append(eps, w.oEndpoint(w.nodes[e.node]))
		addrs = append(addrs, fmt.Sprintf("127.1.%d.%d:%d", i, j+1, port+1000))
		ready = append(ready, e.ready)
	}
	prio := oPriorities(set, force || (pp != nil && pp.od), w.oEndpoint(w.nodes[0]), eps)
	return loadedReady(prio, ready, addrs), true
}

// loadedReady are the ready addresses of the priorities Envoy's priority
// load gives traffic (see istioFirstReady).
func loadedReady(prio []int, ready []bool, addrs []string) []string {
	n := slices.Max(append(prio, 0)) + 1
	readyN, total := make([]int, n), make([]int, n)
	for k, p := range prio {
		total[p]++
		if ready[k] {
			readyN[p]++
		}
	}
	avail := make([]int, n)
	sum := 0
	for p := range n {
		if total[p] > 0 {
			avail[p] = min(100, 140*readyN[p]/total[p])
		}
		sum += avail[p]
	}
	nta, before := min(100, sum), 0
	var out []string
	for p := range n {
		if readyN[p] > 0 && before < nta {
			for k := range prio {
				if prio[k] == p && ready[k] {
					out = append(out, addrs[k])
				}
			}
		}
		before += avail[p]
	}
	return out
}
