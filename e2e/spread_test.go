package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/internal/topology"
	"github.com/loctree/loctree/shared"
)

// spreadSource is one source locality of TestPerPrioritySpreadAgrees, with
// the loads worked by hand in testdata/spill.yaml.
type spreadSource struct {
	name string
	loc  shared.Locality
	// healthy and degraded load in percent per match depth (rank)
	healthy, degraded map[int]int
}

var spreadSources = []spreadSource{
	{"node", shared.Locality{"region": "us-east", "zone": "us-east-1a"}, map[int]int{2: 35, 1: 65, 0: 0}, map[int]int{2: 0, 1: 0, 0: 0}},
	{"east-1c", shared.Locality{"region": "us-east", "zone": "us-east-1c"}, map[int]int{1: 70, 0: 30}, map[int]int{1: 0, 0: 0}},
	{"mars", shared.Locality{"region": "mars"}, map[int]int{0: 80}, map[int]int{0: 20}},
}

const (
	spillVIP   = "127.77.65.1:9080"
	spillHost  = "spill"
	distVIP    = "127.77.65.2:9080"
	distHost   = "dist"
	locVIP     = "127.77.65.3:9080"
	locHost    = "loc"
	spreadAsks = 600 // per source and data plane
)

// distShares are the dist service's target shares for a us-east source,
// worked by hand in testdata/spill.yaml, by the target's endpoints.
var distShares = map[string]int{"127.0.66.2:9080": 70, "127.0.66.3:9080": 70, "127.0.66.4:9080": 30}

// locShares are the loc service's shares per endpoint (percent) per source,
// worked by hand in testdata/spill.yaml from Envoy's locality weighted LB
// (issue 26 item 2): the draw of a locality inside the priority.
var locShares = map[string]map[string]float64{
	"node":    {"127.0.67.2:9080": 93 * 3 / 7.0, "127.0.67.3:9080": 93 * 4 / 21.0, "127.0.67.4:9080": 93 * 4 / 21.0, "127.0.67.5:9080": 93 * 4 / 21.0, "127.0.67.7:9080": 7},
	"east-1c": {"127.0.67.2:9080": 93 * 3 / 7.0, "127.0.67.3:9080": 93 * 4 / 21.0, "127.0.67.4:9080": 93 * 4 / 21.0, "127.0.67.5:9080": 93 * 4 / 21.0, "127.0.67.7:9080": 7},
	"mars":    {"127.0.67.2:9080": 37.5, "127.0.67.3:9080": 50 / 3.0, "127.0.67.4:9080": 50 / 3.0, "127.0.67.5:9080": 50 / 3.0, "127.0.67.7:9080": 12.5},
}

// TestPerPrioritySpreadAgrees (issue 11, "the topology file drives it end to
// end"): one topology file with a spillover service; `loctree tree pick`
// prints the per-priority loads (checked against the hand-worked numbers in
// testdata/spill.yaml), and the real agent's kernel redirects and a real
// `loctree wasm serve` (its filter fetching the agent's tree) spread their
// picks the same way: per source, the picks per (match depth, healthy or
// degraded) class pass a chi-square test against the loads at p = 0.001,
// and a class with no load gets no pick. The same holds for a service with
// an Istio distribute rule: picks per target against the targets' shares,
// none outside the targets. And for a service where istiod turns Envoy's
// locality weighted LB on (issue 26 item 2), `tree pick --count` (shared),
// the kernel and the filter each spread over the endpoints as Envoy's
// locality draw inside the priority says (locShares; chi-square per
// endpoint at p = 0.001; none on an endpoint without a share). And for a
// distribute rule whose targets hold several localities (issue 26 item 5):
// every plane spreads per locality as Istio weighs them and Envoy scales
// them by health (distLocShares). And round_robin and least_request weigh
// the candidates as Envoy's EDF schedule does (issue 26 item 6,
// weightedPlanes). And Istio's priorities across networks with a failover
// rule (issue 26 items 3 and 4, netShares), across clusters (a cluster
// before region, cluShares) and by class before the locality (network and
// cluster before region, clsShares) from the node source.
func TestPerPrioritySpreadAgrees(t *testing.T) {
	kerneltest.RequireRoot(t)
	cli, wasm := build(t)
	top, err := topology.Load("testdata/spill.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, svc := range top.Services {
		for _, e := range svc.Endpoints {
			addrs = append(addrs, e.Address)
		}
	}
	backends(t, addrs)
	for _, s := range spreadSources {
		pickLoadsAre(t, cli, s)
	}
	pickSharesAre(t, cli)
	for _, s := range spreadSources {
		checkLocality(t, "tree pick", s.name, pickLocality(t, cli, s, locHost))
		checkDistLocality(t, "tree pick", s, pickLocality(t, cli, s, distLocHost))
	}
	checkNetwork(t, "tree pick", pickLocality(t, cli, onNetwork(spreadSources[0]), netHost))
	checkCluster(t, "tree pick", pickLocality(t, cli, inCluster(spreadSources[0]), cluHost))
	checkClasses(t, "tree pick", pickLocality(t, cli, inCluster(onNetwork(spreadSources[0])), clsHost))

	cg := kerneltest.Cgroup(t)
	fs := filepath.Join(kerneltest.BPFFS(t), "loctree")
	listen := kerneltest.FreeAddr(t)
	args := []string{"agent", "-f", "testdata/spill.yaml", "--cgroup", cg, "--bpffs", fs, "--listen", listen}
	for _, s := range spreadSources {
		if s.name == "node" {
			args = append(args, "--locality", flagLocality(inCluster(onNetwork(s)).loc))
			continue
		}
		childCgroup(t, cg, s.name)
		args = append(args, "--cgroup-locality", filepath.Join(cg, s.name)+":"+flagLocality(s.loc))
	}
	t.Cleanup(func() { run(t, cli, "agent", "uninstall", "--cgroup", cg, "--bpffs", fs) }) // after the agent stops
	start(t, cli, "agent", args...)
	kerneltest.Eventually(t, 15*time.Second, "agent healthz", func() error { return httpOK("http://"+listen+"/healthz", "") })

	for _, s := range spreadSources {
		p := &planes{t: t, cg: cg}
		kernel, kernelDist, kernelLoc, kernelDL := map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}
		var kernelW map[string]map[string]int
		kernelNet, kernelClu, kernelCls := map[string]int{}, map[string]int{}, map[string]int{}
		p.inCgroup(source{cgroup: map[bool]string{true: "", false: s.name}[s.name == "node"]}, func() {
			if s.name == "node" {
				kernelW = weightedConnects(t, s.name)
				connects(t, s.name, netVIP, kernelNet)
				connects(t, s.name, cluVIP, kernelClu)
				connects(t, s.name, clsVIP, kernelCls)
			}
			connects(t, s.name, spillVIP, kernel)
			connects(t, s.name, locVIP, kernelLoc)
			connects(t, s.name, distLocVIP, kernelDL)
			if s.loc["region"] == "us-east" {
				connects(t, s.name, distVIP, kernelDist)
			}
		})
		checkSpread(t, "kernel", s, top, kernel)
		checkLocality(t, "kernel", s.name, kernelLoc)
		checkDistLocality(t, "kernel", s, kernelDL)
		proxy := spreadProxy(t, cli, wasm, listen, inCluster(onNetwork(s)))
		filter := requests(t, s.name, proxy, spillHost)
		checkSpread(t, "filter", s, top, filter)
		checkLocality(t, "filter", s.name, requests(t, s.name, proxy, locHost))
		checkDistLocality(t, "filter", s, requests(t, s.name, proxy, distLocHost))
		if s.loc["region"] == "us-east" {
			checkShares(t, "kernel", s.name, kernelDist)
			checkShares(t, "filter", s.name, requests(t, s.name, proxy, distHost))
		}
		if s.name == "node" {
			weightedPlanes(t, cli, proxy, s, kernelW)
			checkNetwork(t, "kernel", kernelNet)
			checkNetwork(t, "filter", requests(t, s.name, proxy, netHost))
			checkCluster(t, "kernel", kernelClu)
			checkCluster(t, "filter", requests(t, s.name, proxy, cluHost))
			checkClasses(t, "kernel", kernelCls)
			checkClasses(t, "filter", requests(t, s.name, proxy, clsHost))
		}
	}
}

// connects counts the backends of spreadAsks connects to vip.
func connects(t *testing.T, src, vip string, into map[string]int) {
	t.Helper()
	for range spreadAsks {
		got, err := dialVIP(vip)
		if err != nil {
			t.Fatalf("%s: kernel, %s: %v", src, vip, err)
		}
		into[got]++
	}
}

// requests counts the backends of spreadAsks requests for host.
func requests(t *testing.T, src, proxy, host string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for range spreadAsks {
		got, err := ask(proxy, host)
		if err != nil {
			t.Fatalf("%s: filter, %s: %v", src, host, err)
		}
		out[got[0]]++
	}
	return out
}

// checkShares tests the dist service's picks per target against
// distShares (chi-square at p = 0.001, 1 df); no pick outside the targets.
func checkShares(t *testing.T, plane, src string, picks map[string]int) {
	t.Helper()
	perShare := map[int]int{}
	for addr, n := range picks {
		share, ok := distShares[addr]
		if !ok {
			t.Errorf("%s, %s: %d picks of %s, which no distribute target holds", plane, src, n, addr)
			continue
		}
		perShare[share] += n
	}
	chi2 := 0.0
	for _, share := range []int{70, 30} {
		want := float64(spreadAsks*share) / 100
		chi2 += (float64(perShare[share]) - want) * (float64(perShare[share]) - want) / want
	}
	if chi2 > 10.83 {
		t.Errorf("%s, %s: distribute picks %v (by share) give chi-square %.1f against 70/30", plane, src, perShare, chi2)
	}
	t.Logf("%s, %s: distribute picks by share %v (chi-square %.2f)", plane, src, perShare, chi2)
}

// pickLoadsAre checks `loctree tree pick -o json`'s loads against the
// hand-worked ones.
func pickLoadsAre(t *testing.T, cli string, s spreadSource) {
	t.Helper()
	out, err := exec.Command(cli, "tree", "pick", "-f", "testdata/spill.yaml", "--service", spillHost,
		"--from", flagLocality(s.loc), "-o", "json").Output()
	if err != nil {
		t.Fatalf("tree pick: %v", err)
	}
	var res struct {
		Loads []struct {
			Matched      int `json:"matched"`
			HealthyLoad  int `json:"healthy_load"`
			DegradedLoad int `json:"degraded_load"`
		} `json:"loads"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("tree pick: %v\n%s", err, out)
	}
	if len(res.Loads) != len(s.healthy) {
		t.Fatalf("%s: tree pick shows %d priorities, want %d:\n%s", s.name, len(res.Loads), len(s.healthy), out)
	}
	for _, l := range res.Loads {
		if l.HealthyLoad != s.healthy[l.Matched] || l.DegradedLoad != s.degraded[l.Matched] {
			t.Errorf("%s: tree pick: depth %d loads %d/%d, want %d/%d", s.name, l.Matched, l.HealthyLoad, l.DegradedLoad, s.healthy[l.Matched], s.degraded[l.Matched])
		}
	}
}

// pickLocality is `loctree tree pick --count spreadAsks -o json`'s picks
// of a service (host) from the source.
func pickLocality(t *testing.T, cli string, s spreadSource, host string) map[string]int {
	t.Helper()
	out, err := exec.Command(cli, "tree", "pick", "-f", "testdata/spill.yaml", "--service", host,
		"--from", flagLocality(s.loc), "--count", fmt.Sprint(spreadAsks), "-o", "json").Output()
	if err != nil {
		t.Fatalf("tree pick: %v", err)
	}
	var res struct {
		Picks map[string]int `json:"picks"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("tree pick: %v\n%s", err, out)
	}
	return res.Picks
}

// checkLocality tests the loc service's picks per endpoint against
// locShares (chi-square at p = 0.001, 4 df); no pick outside them.
func checkLocality(t *testing.T, plane, src string, picks map[string]int) {
	t.Helper()
	want := locShares[src]
	chi2 := 0.0
	for addr, n := range picks {
		if want[addr] == 0 {
			t.Errorf("%s, %s: %d picks of %s, which Envoy's locality draw gives no share", plane, src, n, addr)
		}
	}
	for addr, share := range want {
		e := float64(spreadAsks) * share / 100
		chi2 += (float64(picks[addr]) - e) * (float64(picks[addr]) - e) / e
	}
	if chi2 > 18.47 {
		t.Errorf("%s, %s: loc picks %v give chi-square %.1f (limit 18.47, 4 df) against Envoy's locality shares %v", plane, src, picks, chi2, want)
	}
	t.Logf("%s, %s: loc picks %v (chi-square %.2f)", plane, src, picks, chi2)
}

// pickSharesAre checks `loctree tree pick -o json`'s distribute shares for
// a us-east source against the hand-worked ones.
func pickSharesAre(t *testing.T, cli string) {
	t.Helper()
	out, err := exec.Command(cli, "tree", "pick", "-f", "testdata/spill.yaml", "--service", distHost,
		"--from", "region=us-east,zone=us-east-1a", "-o", "json").Output()
	if err != nil {
		t.Fatalf("tree pick: %v", err)
	}
	var res struct {
		Distribute struct {
			Targets []struct {
				To    string  `json:"to"`
				Share float64 `json:"share"`
			} `json:"targets"`
		} `json:"distribute"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("tree pick: %v\n%s", err, out)
	}
	got := map[string]float64{}
	for _, tg := range res.Distribute.Targets {
		got[tg.To] = tg.Share
	}
	if len(got) != 2 || got["us-east/us-east-1b"] != 70 || got["us-west"] != 30 {
		t.Fatalf("tree pick: distribute shares %v, want us-east/us-east-1b 70, us-west 30:\n%s", got, out)
	}
}

// spreadProxy starts a `wasm serve` whose filter has the source's locality
// and fetches the agent's tree, and waits until it steers.
func spreadProxy(t *testing.T, cli, wasm, agent string, s spreadSource) string {
	t.Helper()
	addr := kerneltest.FreeAddr(t)
	cfg, _ := json.Marshal(map[string]any{"locality": s.loc,
		"tree": map[string]any{"cluster": "outbound|15099||loctree-agent", "refresh_ms": 100}})
	start(t, cli, "wasm serve ("+s.name+")", "wasm", "serve", "--module", wasm, "--listen", addr, "--workers", "2",
		"--cache-dir", t.TempDir(), "--upstream", "outbound|15099||loctree-agent="+agent, "--plugin-config", string(cfg))
	proxy := "http://" + addr
	kerneltest.Eventually(t, 15*time.Second, "wasm serve ("+s.name+") steers", func() error {
		for range 4 { // both workers
			if _, err := ask(proxy, spillHost); err != nil {
				return err
			}
		}
		return nil
	})
	return proxy
}

// checkSpread classifies every pick by its endpoint's match depth and
// health (from the topology, not the tree) and tests the counts against
// the source's loads.
func checkSpread(t *testing.T, plane string, s spreadSource, top *shared.Topology, picks map[string]int) {
	t.Helper()
	type class struct {
		rank     int
		degraded bool
	}
	observed := map[class]int{}
	for _, e := range top.Services[0].Endpoints {
		c := class{rank: rankOf(top.Services[0].Scopes, s.loc, e.Locality), degraded: e.Degraded}
		if n := picks[e.Address]; n > 0 && e.Healthy != nil && !*e.Healthy {
			t.Errorf("%s, %s: %d picks of the unhealthy %s", plane, s.name, n, e.Address)
		}
		observed[c] += picks[e.Address]
	}
	chi2, df := 0.0, -1
	for c, n := range observed {
		load := s.healthy[c.rank]
		if c.degraded {
			load = s.degraded[c.rank]
		}
		if load == 0 {
			if n > 0 {
				t.Errorf("%s, %s: %d picks at depth %d (degraded %v), which has no load", plane, s.name, n, c.rank, c.degraded)
			}
			continue
		}
		want := float64(spreadAsks*load) / 100
		chi2 += (float64(n) - want) * (float64(n) - want) / want
		df++
	}
	// chi-square critical values at p = 0.001 for 0..2 degrees of freedom
	if limit := []float64{0, 10.83, 13.82}[max(df, 0)]; chi2 > limit {
		t.Errorf("%s, %s: picks %v give chi-square %.1f (limit %.2f, %d df) against loads %v/%v", plane, s.name, observed, chi2, limit, df, s.healthy, s.degraded)
	}
	t.Logf("%s, %s: %v (chi-square %.2f)", plane, s.name, slices.Sorted(func(yield func(string) bool) {
		for c, n := range observed {
			if !yield(fmt.Sprintf("depth %d degraded=%v: %d", c.rank, c.degraded, n)) {
				return
			}
		}
	}), chi2)
}

// rankOf is the ztunnel rank: the scopes matched before the first mismatch.
func rankOf(scopes []string, src, loc shared.Locality) int {
	r := 0
	for _, sc := range scopes {
		if src[sc] != loc[sc] {
			break
		}
		r++
	}
	return r
}

// childCgroup creates the cgroup name below cg; on cleanup the test process
// moves back to cg and it is removed.
func childCgroup(t *testing.T, cg, name string) {
	t.Helper()
	dir := filepath.Join(cg, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		kerneltest.MoveTo(t, cg)
		if err := os.Remove(dir); err != nil {
			t.Errorf("remove cgroup: %v", err)
		}
	})
}
