package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/loctree/loctree/host"
	"github.com/loctree/loctree/internal/testing/wasmtest"
)

// TestWasmRandomRules is TestKernelRandomRules' other data plane: random
// worlds through the fake API into the agent's topology, and that topology
// into the real filter .wasm (in the wazero host) as a proxy on n0 gets it.
// A request for each Service port, named as Istio names its cluster
// (outbound|PORT||FQDN), is steered to an endpoint of a priority Envoy's
// priority load gives traffic under Istio's transcribed functions
// (istioFirstReady).
func TestWasmRandomRules(t *testing.T) {
	h := wasmRulesHost(t)
	rounds, nServices, checked := 3, 12, 0
	for round := range rounds {
		rng := rand.New(rand.NewPCG(uint64(300+round), 12))
		w := newRandomWorld(rng, nServices)
		core, rules := w.objects()
		c := runIstio(t, newClient(core...), newIstio(rules...), w.meshConfig(t))
		u := c.waitFor(t, 0, "every service", func(u Update) bool { return len(u.Topology.Services) == 2*nServices })
		top, err := json.Marshal(u.Topology)
		if err != nil {
			t.Fatal(err)
		}
		loc, _ := json.Marshal(u.Locality)
		vm := h.vm(t, fmt.Sprintf(`{"topology":%s,"locality":%s}`, top, loc))
		for i, s := range w.services {
			for _, port := range []uint32{80, 81} {
				want, ok := w.istioFirstReady(i, port)
				if !ok {
					continue
				}
				checked++
				cluster := fmt.Sprintf("outbound|%d||%s.%s.svc.cluster.local", port, svcName(s.ns), s.ns)
				for range 8 {
					got, steered := vm.ask(t, cluster)
					switch {
					case len(want) == 0 && steered:
						t.Errorf("round %d, %s: steered to %q, want no endpoint", round, cluster, got)
					case len(want) > 0 && !slices.Contains(want, got):
						t.Errorf("round %d, %s: steered to %q, want one of %v\n  rules %v", round, cluster, got, want, w.rulesOf(s.ns))
					}
				}
			}
		}
		vm.Close()
	}
	if checked < rounds*nServices/3 {
		t.Errorf("only %d service ports checked", checked)
	}
	t.Logf("%d service ports checked through the .wasm", checked)
}

type rulesHost struct{ wasm []byte }

type rulesVM struct {
	*host.VM
	h *host.Host
}

func wasmRulesHost(t *testing.T) rulesHost {
	return rulesHost{wasm: wasmtest.Bytes(t, "github.com/loctree/loctree/filter")}
}

// vm starts the filter with a plugin configuration.
func (r rulesHost) vm(t *testing.T, config string) rulesVM {
	ctx := context.Background()
	h, err := host.New(ctx, r.wasm, host.Options{PluginConfig: []byte(config)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(ctx) })
	vm, err := h.NewVM(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return rulesVM{VM: vm, h: h}
}

// ask sends one request for the cluster and returns the endpoint the filter
// chose, false when it chose none.
func (v rulesVM) ask(t *testing.T, cluster string) (string, bool) {
	p := host.NewProperties()
	p.SetString(host.SplitPath("xds.cluster_name"), cluster)
	res, err := v.Do(context.Background(), &host.Request{Headers: host.Headers([][2]string{{":method", "GET"}, {":path", "/"}, {":authority", "unused"}}), Properties: p}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := res.Request.Headers.Get("x-gateway-destination-endpoint")
	return got, ok
}
