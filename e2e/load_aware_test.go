package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/loctree/loctree/internal/testing/wasmtest"
	"github.com/loctree/loctree/shared"
)

// loadZones is the load test's service: one region, three zones; the first
// has one endpoint, the others four each (addresses on 127.0.70.0/24).
func loadZones() *loadScenario {
	zone := func(name string, hosts ...int) loadZone {
		z := loadZone{loc: shared.Locality{"region": "us-east", "zone": name}}
		for _, h := range hosts {
			z.endpoints = append(z.endpoints, fmt.Sprintf("127.0.70.%d:9080", h))
		}
		return z
	}
	return &loadScenario{
		vip: "127.77.70.1:9080",
		zones: []loadZone{
			zone("us-east-1a", 1),
			zone("us-east-1b", 11, 12, 13, 14),
			zone("us-east-1c", 21, 22, 23, 24),
		},
		// 4 workers × 100 ms: 40 requests per second per endpoint; a
		// queue of 8 lets a request wait at most two service times. A
		// service time long against the test's own scheduling delays on
		// a busy machine (tens of milliseconds), which count as time in
		// flight too.
		service: 100 * time.Millisecond, workers: 4, queue: 8,
	}
}

// overloaded offers the first zone 3× its endpoints' capacity and the
// others a quarter of theirs: 120, 40 and 40 requests per second, 56 % of
// the service's 360 in all, so the service as a whole has room.
func overloaded(sc *loadScenario) []float64 {
	return []float64{3 * sc.capacity(0), sc.capacity(1) / 4, sc.capacity(2) / 4}
}

// balanced offers every zone half its endpoints' capacity.
func balanced(sc *loadScenario) []float64 {
	return []float64{sc.capacity(0) / 2, sc.capacity(1) / 2, sc.capacity(2) / 2}
}

// newFilterPlane builds the filter (as `make wasm` does) and compiles it
// once for every proxy of the test. Two workers per proxy, as `loctree wasm
// serve` runs by default; each counts its own requests in flight
// (docs/WASM.md, "Load-aware widening").
func newFilterPlane(t *testing.T) *filterPlane {
	t.Helper()
	cache := wazero.NewCompilationCache()
	t.Cleanup(func() { cache.Close(context.Background()) })
	return &filterPlane{module: wasmtest.Bytes(t, "../filter"), cache: cache, workers: 2}
}

// TestLoadAwareYieldsUnderOverload (issue 25, the always-run part of the
// load test): through the real filter, one zone's clients are offered 3×
// its endpoint's capacity for 2 s. With static locality every one of their
// requests stays in the zone (the endpoint sheds the excess as 503s); with
// load_aware at least a third of them go to the other zones (the zone's
// endpoint serves at most a third of what is offered, and the band keeps
// it near that), and at most half as many fail. Once the load has stopped
// and the requests in flight are done, the zone's clients are back on its
// own endpoint. And when no zone is overloaded (each offered half its
// capacity for 2 s), load_aware keeps at least 80 % of all requests in the
// client's zone.
func TestLoadAwareYieldsUnderOverload(t *testing.T) {
	sc := loadZones()
	yieldsUnderOverload(t, newFilterPlane(t), sc, startLoadBackends(t, sc))
}

// TestLoadAwareYieldsUnderOverloadKernel is the same on the kernel plane
// (as root): the real agent, a connection to the VIP per request from each
// zone's cgroup, the band counting open connections per tree node: the
// node's, not a VM's, so the band is the backends' concurrency (workersBand).
func TestLoadAwareYieldsUnderOverloadKernel(t *testing.T) {
	sc := loadZones()
	sc.workersBand()
	plane := newKernelPlane(t, sc.vip)
	yieldsUnderOverload(t, plane, sc, startLoadBackends(t, sc))
}

// yieldsUnderOverload is TestLoadAwareYieldsUnderOverload on plane.
func yieldsUnderOverload(t *testing.T, plane loadPlane, sc *loadScenario, lb *loadBackends) {
	static := runLoad(t, plane, sc, lb, staticLocality, overloaded(sc), 2*time.Second).total(0)
	if static.localShare() != 1 {
		t.Fatalf("static locality: the overloaded zone's clients reached other zones (local %.3f of %d)", static.localShare(), static.reached)
	}
	send, stop, err := startPlane(t, plane, sc, loadAware)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	// Only the overloaded zone's clients: its proxy alone decides where
	// they go.
	hot := &zoneStats{}
	offer(context.Background(), sc, 0, send[0], overloaded(sc)[0], 2*time.Second, newRand(1), hot)
	lb.drained(t)
	t.Logf("overloaded zone: static locality local %.1f %%, errors %.1f %%; load_aware local %.1f %%, errors %.1f %% (%d requests)",
		100*static.localShare(), 100*static.errorRate(), 100*hot.localShare(), 100*hot.errorRate(), hot.sent)
	if remote := 1 - hot.localShare(); remote < 1.0/3 {
		t.Errorf("load_aware under 3× overload sent %.1f %% of the zone's requests to other zones, want at least a third", 100*remote)
	}
	if hot.errorRate() > static.errorRate()/2 {
		t.Errorf("load_aware failed %.1f %% of the overloaded zone's requests, static locality %.1f %%: want at most half as many",
			100*hot.errorRate(), 100*static.errorRate())
	}
	backHome(t, sc, send[0])
	stop()
	all := runLoad(t, plane, sc, lb, loadAware, balanced(sc), 2*time.Second).total()
	t.Logf("no zone overloaded: load_aware local %.1f %% of %d requests, errors %.1f %%", 100*all.localShare(), all.sent, 100*all.errorRate())
	if all.localShare() < 0.8 {
		t.Errorf("load_aware with no zone overloaded kept %.1f %% of the requests in the client's zone, want at least 80 %%", 100*all.localShare())
	}
}

// backHome sends 20 requests of the first zone's clients one after
// another, nothing else in flight: every one must be answered by the
// zone's own endpoint (the widened node narrowed below the band's low
// edge).
func backHome(t *testing.T, sc *loadScenario, send sendFunc) {
	t.Helper()
	s := &zoneStats{}
	for range 20 {
		status, backend, err := send(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		s.add(0, status, sc.zoneOf(backend) == 0, sc.zoneOf(backend) >= 0)
	}
	if s.local != 20 || s.failed != 0 {
		t.Errorf("after the load: %d of 20 requests answered by the zone's endpoint, %d failed; want all of them there", s.local, s.failed)
	}
}

// TestMeasureLoadAware is a measurement, not a check: it runs only with
// LOCTREE_MEASURE=loadaware and prints the tables of docs/PERFORMANCE.md,
// "Load-aware widening under overload":
//
//	LOCTREE_MEASURE=loadaware go test -count=1 -run TestMeasureLoadAware -v -timeout 30m ./e2e/
//
// Two loads: the first zone offered 3× its capacity (overloaded), and
// every zone half of its (balanced). Each runs LOCTREE_MEASURE_ROUNDS
// (default 3) rounds of static locality, load_aware and no locality, the
// order rotated round by round, LOCTREE_MEASURE_SECONDS (default 10) each;
// it prints every run, then the medians and the range over the rounds.
// LOCTREE_MEASURE_PLANE=kernel (as root) drives the kernel plane instead
// of the filter; a configuration the plane does not install is reported
// as not run.
func TestMeasureLoadAware(t *testing.T) {
	if os.Getenv("LOCTREE_MEASURE") != "loadaware" {
		t.Skip("a measurement: set LOCTREE_MEASURE=loadaware to run it")
	}
	d := time.Duration(envInt(t, "LOCTREE_MEASURE_SECONDS", 10)) * time.Second
	rounds := envInt(t, "LOCTREE_MEASURE_ROUNDS", 3)
	sc := loadZones()
	lb := startLoadBackends(t, sc)
	plane := measuredPlane(t, sc)
	for _, load := range []struct {
		name  string
		rates []float64
	}{{"overloaded", overloaded(sc)}, {"balanced", balanced(sc)}} {
		fmt.Printf("\n%s, %s: offered %.0f / %.0f / %.0f requests per second, %s a run, %d rounds; before: %s\n",
			plane.name(), load.name, load.rates[0], load.rates[1], load.rates[2], d, rounds, uptime())
		runs := measureRounds(t, plane, sc, lb, load.rates, d, rounds)
		fmt.Printf("after: %s\n\n%s, medians of %d runs (range):\n%s\n", uptime(), load.name, rounds, tableHead(sc))
		for _, cfg := range loadConfigs {
			if len(runs[cfg]) > 0 {
				fmt.Println(medianRow(cfg, runs[cfg]))
			}
		}
		var ratios []float64
		for r := range min(len(runs[loadAware]), len(runs[noLocality])) {
			ratios = append(ratios, float64(runs[loadAware][r].total().quantile(0.99))/float64(runs[noLocality][r].total().quantile(0.99)))
		}
		if len(ratios) > 0 {
			fmt.Printf("p99 load_aware / no locality, round by round: %s\n", spread(ratios, "%.2f"))
		}
	}
}

// loadConfigs are the configurations a measurement compares.
var loadConfigs = []lbConfig{staticLocality, loadAware, noLocality}

// measuredPlane is the plane LOCTREE_MEASURE_PLANE names (default filter).
func measuredPlane(t *testing.T, sc *loadScenario) loadPlane {
	switch v := os.Getenv("LOCTREE_MEASURE_PLANE"); v {
	case "", "filter":
		return newFilterPlane(t)
	case "kernel":
		sc.workersBand()
		return newKernelPlane(t, sc.vip)
	default:
		t.Fatalf("LOCTREE_MEASURE_PLANE=%q: want filter or kernel", v)
		return nil
	}
}

// measureRounds runs every configuration rounds times, the order rotated
// round by round, printing each run; a configuration the plane does not
// start is printed as not run.
func measureRounds(t *testing.T, plane loadPlane, sc *loadScenario, lb *loadBackends, rates []float64, d time.Duration, rounds int) map[lbConfig][]*loadResult {
	fmt.Println(tableHead(sc))
	runs := map[lbConfig][]*loadResult{}
	for r := range rounds {
		for i := range loadConfigs {
			cfg := loadConfigs[(i+r)%len(loadConfigs)]
			res, err := tryLoad(t, plane, sc, lb, cfg, rates, d)
			if err != nil {
				fmt.Printf("| %s | not run: %s |\n", cfg, strings.ReplaceAll(err.Error(), "\n", " "))
				continue
			}
			fmt.Println(res.row())
			runs[cfg] = append(runs[cfg], res)
		}
	}
	return runs
}

func tableHead(sc *loadScenario) string {
	return "| configuration | requests | p50 | p99 | errors | local (all) | local (" + sc.zones[0].name() + ") |\n|---|---:|---:|---:|---:|---:|---:|"
}

// medianRow is a table row of the medians of runs, with the range.
func medianRow(cfg lbConfig, runs []*loadResult) string {
	var p50, p99, errs, local, hot []float64
	for _, r := range runs {
		all := r.total()
		p50 = append(p50, float64(all.quantile(0.50).Microseconds())/1000)
		p99 = append(p99, float64(all.quantile(0.99).Microseconds())/1000)
		errs = append(errs, 100*all.errorRate())
		local = append(local, 100*all.localShare())
		hot = append(hot, 100*r.total(0).localShare())
	}
	return fmt.Sprintf("| %s | %d | %s ms | %s ms | %s %% | %s %% | %s %% |", cfg, runs[0].total().sent,
		spread(p50, "%.1f"), spread(p99, "%.1f"), spread(errs, "%.1f"), spread(local, "%.1f"), spread(hot, "%.1f"))
}

// spread is the median of v and, when they differ, its range:
// "93.3 (90.1–99.1)".
func spread(v []float64, format string) string {
	v = slices.Clone(v)
	slices.Sort(v)
	out := fmt.Sprintf(format, v[len(v)/2])
	if lo, hi := fmt.Sprintf(format, v[0]), fmt.Sprintf(format, v[len(v)-1]); lo != hi {
		out += " (" + lo + "–" + hi + ")"
	}
	return out
}

// envInt is the whole number in the environment variable name, at least
// 1; def when it is not set.
func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a whole number, at least 1", name, v)
	}
	return n
}

// uptime is the machine's load, as `uptime` prints it.
func uptime() string {
	out, err := exec.Command("uptime").Output()
	if err != nil {
		return "uptime: " + err.Error()
	}
	return strings.TrimSpace(string(out))
}
