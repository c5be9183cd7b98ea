package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/loctree/loctree/host"
	"github.com/loctree/loctree/shared"
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"
)

// spilloverCase is one source asking one spillover service, picksPer times.
type spilloverCase struct {
	top     *shared.Topology
	svc     string // the service's name (also its host)
	src     shared.Locality
	byAddr  map[string]spilloverEndpoint
	summary string
}

// spilloverEndpoint is what the test knows about an endpoint from the
// topology it wrote: its locality and its health state.
type spilloverEndpoint struct {
	loc      shared.Locality
	healthy  bool
	degraded bool
}

// spilloverCases makes n random spillover services and sources: a few
// localities so that every depth matches, unhealthy and degraded endpoints
// so that load spills and panics, every policy.
func spilloverCases(n int, rng *rand.Rand) []spilloverCase {
	policies := []string{"random", "weighted", "round_robin", "least_request", "least_connections", "consistent_hash"}
	var cases []spilloverCase
	for i := range n {
		of, panicT := uint32(100+rng.IntN(101)), uint32(rng.IntN(80))
		svc := shared.ServiceSpec{
			Name: fmt.Sprintf("svc%d", i), Policy: policies[rng.IntN(len(policies))],
			Spillover: &shared.SpilloverSpec{OverprovisioningFactor: &of, PanicThreshold: &panicT},
		}
		c := spilloverCase{svc: svc.Name, byAddr: map[string]spilloverEndpoint{}}
		for e := range 2 + rng.IntN(40) {
			healthy, degraded := rng.IntN(3) != 0, rng.IntN(6) == 0
			if !healthy {
				degraded = false
			}
			w := uint32(1 + rng.IntN(4))
			ep := shared.EndpointSpec{
				Address: fmt.Sprintf("127.0.%d.%d:9080", 10+i%200, 1+e),
				Locality: shared.Locality{"region": fmt.Sprintf("r%d", rng.IntN(2)), "zone": fmt.Sprintf("z%d", rng.IntN(2)),
					"subzone": fmt.Sprintf("s%d", rng.IntN(2))},
				Weight: &w, Healthy: &healthy, Degraded: degraded,
			}
			svc.Endpoints = append(svc.Endpoints, ep)
			c.byAddr[ep.Address] = spilloverEndpoint{loc: ep.Locality, healthy: healthy, degraded: degraded}
		}
		if i%3 == 0 { // Istio's distribute: one priority over weighted targets
			svc.Distribute = []shared.DistributeSpec{
				{From: "r0", To: map[string]uint32{"r0/z0": 60, "r1": 40}},
				{From: "r1/z1/*", To: map[string]uint32{"r1/z1/s1": 70, "r0/z1/s0": 30}},
			}
		}
		c.top = &shared.Topology{Services: []shared.ServiceSpec{svc}}
		c.src = shared.Locality{"region": fmt.Sprintf("r%d", rng.IntN(3)), "zone": fmt.Sprintf("z%d", rng.IntN(2)),
			"subzone": fmt.Sprintf("s%d", rng.IntN(2))}
		c.summary = fmt.Sprintf("%s (%s, of %d, panic %d) from %v", svc.Name, svc.Policy, of, panicT, c.src)
		cases = append(cases, c)
	}
	return cases
}

func (c *spilloverCase) config(t testing.TB) string {
	top, err := json.Marshal(c.top)
	if err != nil {
		t.Fatal(err)
	}
	loc, _ := json.Marshal(c.src)
	return fmt.Sprintf(`{"topology":%s,"locality":%s}`, top, loc)
}

// rank is the length of the scope prefix an endpoint shares with the
// source (the ztunnel rule, written from the topology, not from the tree).
func (c *spilloverCase) rank(loc shared.Locality) int {
	r := 0
	for _, sc := range shared.DefaultScopes() {
		if loc[sc] != c.src[sc] {
			break
		}
		r++
	}
	return r
}

// bucket is the share of the load a pick of addr belongs to: its priority's
// healthy load, degraded load, or (priority in panic) both. ok is false for
// an endpoint no share may reach (unhealthy outside panic, unknown).
func (c *spilloverCase) bucket(l *shared.Loads, addr string) (b int, ok bool) {
	ep, known := c.byAddr[addr]
	if !known {
		return 0, false
	}
	r := c.rank(ep.loc)
	for p := range l.N {
		if int(l.Rank[p]) != r {
			continue
		}
		switch {
		case l.InPanic(p):
			return 2 * p, true
		case ep.healthy && !ep.degraded:
			return 2 * p, true
		case ep.degraded:
			return 2*p + 1, true
		}
	}
	return 0, false
}

// expected is the percent of picks each bucket should get by shared's
// loads: Envoy's choosePriority, healthy then degraded; a priority in panic
// takes both its loads on all its endpoints; no load at all falls back to
// P0's healthy endpoints.
func expected(l *shared.Loads) []float64 {
	want := make([]float64, 2*l.N)
	sum := 0.0
	for p := range l.N {
		h, d := float64(l.Healthy[p]), float64(l.Degraded[p])
		if l.InPanic(p) {
			h, d = h+d, 0
		}
		want[2*p], want[2*p+1] = h, d
		sum += h + d
	}
	if sum == 0 {
		want[0] = 100
	}
	return want
}

// checkSpread fails unless the picks (address → count) follow shared's
// loads for the case: no pick outside the loaded buckets, and a chi-square
// over the buckets below the p = 3e-5 critical value (Wilson–Hilferty,
// z = 4), so that a run of many cases stays reliable.
func checkSpread(t *testing.T, c *spilloverCase, l *shared.Loads, picks map[string]int) {
	t.Helper()
	want := expected(l)
	got := make([]float64, len(want))
	total := 0
	for addr, n := range picks {
		b, ok := c.bucket(l, addr)
		if !ok || want[b] == 0 {
			t.Fatalf("%s: %d picks of %s, which no loaded priority holds (loads %+v)", c.summary, n, addr, loadsLine(l))
		}
		got[b] += float64(n)
		total += n
	}
	chi2, df := 0.0, -1
	for b, w := range want {
		if w == 0 {
			continue
		}
		e := w / 100 * float64(total)
		chi2 += (got[b] - e) * (got[b] - e) / e
		df++
	}
	if df > 0 && chi2 > chi2Critical(df, 4) {
		t.Fatalf("%s: picks per priority %v, want shares %v: chi-square %.1f > %.1f (df %d)", c.summary, got, want, chi2, chi2Critical(df, 4), df)
	}
}

// chi2Critical is the chi-square quantile at the normal quantile z
// (Wilson–Hilferty).
func chi2Critical(df int, z float64) float64 {
	k := float64(df)
	a := 2 / (9 * k)
	return k * math.Pow(1-a+z*math.Sqrt(a), 3)
}

func loadsLine(l *shared.Loads) string {
	s := ""
	for p := range l.N {
		s += fmt.Sprintf("P%d rank %d %+v %d%%/%d%% panic %v; ", p, l.Rank[p], l.Counts[p], l.Healthy[p], l.Degraded[p], l.InPanic(p))
	}
	return s
}

const spilloverPicks = 1500

// TestSpilloverParityWasm drives the built .wasm on random spillover
// services × sources and checks its picks follow shared's priority loads
// (docs/FORMAT.md, "Priority load"), and for services with distribute rules
// its targets' shares, for the same source.
func TestSpilloverParityWasm(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 3))
	distributed := 0
	for _, c := range spilloverCases(40, rng) {
		picks := map[string]int{}
		h := newHost(t, c.config(t), host.Options{})
		vm, err := h.NewVM(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for range spilloverPicks {
			headers := req(c.svc, [2]string{hashKeyHeader, fmt.Sprint(rng.Uint64())})
			res, err := vm.Do(context.Background(), &host.Request{Headers: host.Headers(headers)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if v, ok := res.Request.Headers.Get(defaultHeader); ok {
				picks[v]++
			}
		}
		if err := vm.Tick(); err != nil { // flushes the per-request counters
			t.Fatal(err)
		}
		vm.Close()
		if c.check(t, picks) {
			distributed++
		}
		c.checkPriorityMetrics(t, h, picks)
	}
	if distributed < 10 {
		t.Fatalf("only %d cases with distribute rules", distributed)
	}
}

// TestSpilloverParityNative runs the same cases through the SDK's emulator.
func TestSpilloverParityNative(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 3))
	distributed := 0
	for _, c := range spilloverCases(40, rng) {
		picks := map[string]int{}
		opt := proxytest.NewEmulatorOption().WithVMContext(&vmContext{}).WithPluginConfiguration([]byte(c.config(t)))
		emu, reset := proxytest.NewHostEmulator(opt)
		if emu.StartPlugin() != types.OnPluginStartStatusOK {
			reset()
			t.Fatalf("%s: plugin start failed: %v", c.summary, emu.GetCriticalLogs())
		}
		for range spilloverPicks {
			id := emu.InitializeHttpContext()
			emu.CallOnRequestHeaders(id, req(c.svc, [2]string{hashKeyHeader, fmt.Sprint(rng.Uint64())}), true)
			for _, kv := range emu.GetCurrentRequestHeaders(id) {
				if kv[0] == defaultHeader {
					picks[kv[1]]++
				}
			}
			emu.CompleteHttpContext(id)
		}
		reset()
		if c.check(t, picks) {
			distributed++
		}
	}
	if distributed < 10 {
		t.Fatalf("only %d cases with distribute rules", distributed)
	}
}

// check compares the picks with shared's loads for the case's source; where
// shared's picker has nothing to pick (no priority, or the load on an empty
// set), the request must get no header.
func (c *spilloverCase) check(t *testing.T, picks map[string]int) (distribute bool) {
	t.Helper()
	tree, err := shared.Build(c.top, shared.BuildOptions{Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	svc, _ := tree.Service(c.svc)
	l := svc.Loads(c.src)
	if _, ok := shared.NewPicker(tree, shared.PickerOptions{Seed: 1}).PickLoads(svc, &l, 0); !ok {
		if len(picks) != 0 {
			t.Fatalf("%s: nothing to pick (loads %s), yet picks %v", c.summary, loadsLine(&l), picks)
		}
		return false
	}
	n := 0
	for _, k := range picks {
		n += k
	}
	if n != spilloverPicks {
		t.Fatalf("%s: %d of %d requests got a header (loads %s)", c.summary, n, spilloverPicks, loadsLine(&l))
	}
	if l.NTargets > 0 {
		checkTargets(t, c, svc.Policy(), &l, picks)
		return true
	}
	checkSpread(t, c, &l, picks)
	return false
}

// checkTargets fails unless the picks of a service with distribute rules
// land only on its targets' endpoints that may take load (healthy or
// degraded, or any in panic), and each target gets shared's TargetShare
// (chi-square as checkSpread; in panic only for random, where the share is
// by endpoint count). A target is found from the topology: the endpoint's
// region/zone/subzone against the pattern's segments.
func checkTargets(t *testing.T, c *spilloverCase, policy shared.Policy, l *shared.Loads, picks map[string]int) {
	t.Helper()
	got := make([]float64, l.NTargets)
	total := 0
	for addr, n := range picks {
		ep := c.byAddr[addr]
		i := targetOf(l, ep.loc)
		if i < 0 || (!l.InPanic(0) && !ep.healthy) {
			t.Fatalf("%s: %d picks of %s (%v, healthy %v), outside the targets' loaded endpoints (%+v)", c.summary, n, addr, ep.loc, ep.healthy, l.Targets[:l.NTargets])
		}
		got[i] += float64(n)
		total += n
	}
	if l.InPanic(0) && policy != shared.PolicyRandom {
		return
	}
	chi2, df := 0.0, -1
	for i := range l.NTargets {
		share := l.TargetShare(i)
		if share == 0 {
			if got[i] > 0 {
				t.Fatalf("%s: %v picks of target %q, whose share is 0", c.summary, got[i], l.Targets[i].Pattern)
			}
			continue
		}
		e := share * float64(total)
		chi2 += (got[i] - e) * (got[i] - e) / e
		df++
	}
	if df > 0 && chi2 > chi2Critical(df, 4) {
		t.Fatalf("%s: picks per target %v, shares of %+v: chi-square %.1f > %.1f (df %d)", c.summary, got, l.Targets[:l.NTargets], chi2, chi2Critical(df, 4), df)
	}
}

// targetOf is the target whose pattern a locality matches, or -1.
func targetOf(l *shared.Loads, loc shared.Locality) int {
	for i := range l.NTargets {
		if patternMatches(l.Targets[i].Pattern, loc) {
			return i
		}
	}
	return -1
}

func patternMatches(pattern string, loc shared.Locality) bool {
	for k, seg := range strings.Split(pattern, "/") {
		if seg != "*" && loc[shared.DefaultScopes()[k]] != seg {
			return false
		}
	}
	return true
}

// checkPriorityMetrics: the filter's loctree_picks_priority_<p>_total
// counters (what `wasm run --count` and `wasm serve` show) equal the picks
// per priority, each pick's priority found from the topology (its rank, as
// checkSpread; every pick of a distribute service is P0).
func (c *spilloverCase) checkPriorityMetrics(t *testing.T, h *host.Host, picks map[string]int) {
	t.Helper()
	tree, err := shared.Build(c.top, shared.BuildOptions{Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	svc, _ := tree.Service(c.svc)
	l := svc.Loads(c.src)
	want := make([]uint64, shared.MaxPriorities)
	for addr, n := range picks {
		p := 0
		if l.NTargets == 0 {
			b, _ := c.bucket(&l, addr)
			p = b / 2
		}
		want[p] += uint64(n)
	}
	for p := range want {
		if got, _ := h.Metrics().Value(priorityMetric(p)); got != want[p] {
			t.Fatalf("%s: %s = %d, want %d", c.summary, priorityMetric(p), got, want[p])
		}
	}
}
