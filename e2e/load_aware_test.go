package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
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
		zones: []loadZone{
			zone("us-east-1a", 1),
			zone("us-east-1b", 11, 12, 13, 14),
			zone("us-east-1c", 21, 22, 23, 24),
		},
		// 4 workers × 50 ms: 80 requests per second per endpoint; a
		// queue of 8 lets a request wait at most two service times.
		service: 50 * time.Millisecond, workers: 4, queue: 8,
	}
}

// overloaded offers the first zone 3× its endpoints' capacity and the
// others a quarter of theirs: 240, 80 and 80 requests per second, 56 % of
// the service's 720 in all, so the service as a whole has room.
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
// its endpoint's capacity for 2 s. With static locality every one of
// their requests stays in the zone (the endpoint sheds the excess as 503s);
// with load_aware at least a third of them go to the other zones (the
// zone's endpoint serves at most a third of what is offered, and the band
// keeps it near that), and at most half as many fail. When the load has stopped and the
// requests in flight are done, the zone's clients are back on its own
// endpoint: 20 requests one after another all land there. And when no
// zone is overloaded (each offered half its capacity for 2 s), load_aware
// keeps at least 80 % of all requests in the client's zone (issue 25).
func TestLoadAwareYieldsUnderOverload(t *testing.T) {
	sc := loadZones()
	lb := startLoadBackends(t, sc)
	plane := newFilterPlane(t)
	static := runLoad(t, plane, sc, lb, staticLocality, overloaded(sc), 2*time.Second).total(0)
	if static.localShare() != 1 {
		t.Fatalf("static locality: the overloaded zone's clients reached other zones (local %.3f of %d)", static.localShare(), static.reached)
	}
	send, stop := startPlane(t, plane, sc, loadAware)
	defer stop()
	res := &loadResult{cfg: loadAware}
	for range sc.zones {
		res.zones = append(res.zones, &zoneStats{})
	}
	// Only the hot zone's clients: its proxy alone decides where they go.
	rates := overloaded(sc)
	rng := newRand(1)
	offer(context.Background(), sc, 0, send[0], rates[0], 2*time.Second, rng, res.zones[0])
	lb.drained(t)
	hot := res.total(0)
	t.Logf("overloaded zone: static locality local %.1f %%, errors %.1f %%; load_aware local %.1f %%, errors %.1f %% (%d requests)",
		100*static.localShare(), 100*static.errorRate(), 100*hot.localShare(), 100*hot.errorRate(), hot.sent)
	if remote := 1 - hot.localShare(); remote < 1.0/3 {
		t.Errorf("load_aware under 3× overload sent %.1f %% of the zone's requests to other zones, want at least a third", 100*remote)
	}
	if hot.errorRate() > static.errorRate()/2 {
		t.Errorf("load_aware failed %.1f %% of the overloaded zone's requests, static locality %.1f %%: want at most half as many", 100*hot.errorRate(), 100*static.errorRate())
	}
	after := &zoneStats{}
	for range 20 {
		status, backend, err := send[0](context.Background())
		if err != nil {
			t.Fatal(err)
		}
		after.add(0, status, sc.zoneOf(backend) == 0, sc.zoneOf(backend) >= 0)
	}
	if after.localShare() != 1 || after.failed != 0 {
		t.Errorf("after the load: %d of 20 requests answered by the zone's endpoint, %d failed; want all of them there", after.local, after.failed)
	}
	stop()
	all := runLoad(t, plane, sc, lb, loadAware, balanced(sc), 2*time.Second).total()
	t.Logf("no zone overloaded: load_aware local %.1f %% of %d requests, errors %.1f %%", 100*all.localShare(), all.sent, 100*all.errorRate())
	if all.localShare() < 0.8 {
		t.Errorf("load_aware with no zone overloaded kept %.1f %% of the requests in the client's zone, want at least 80 %%", 100*all.localShare())
	}
}

// TestMeasureLoadAware is a measurement, not a check: it runs only with
// LOCTREE_MEASURE=loadaware and prints the table of docs/PERFORMANCE.md,
// "Load-aware widening under overload":
//
//	LOCTREE_MEASURE=loadaware go test -count=1 -run TestMeasureLoadAware -v -timeout 30m ./e2e/
//
// For each of static locality, load_aware and no locality, a run where the
// first zone is offered 3× its capacity (overloaded) and one where every
// zone is offered half of its (balanced), LOCTREE_MEASURE_SECONDS (default
// 15) each.
func TestMeasureLoadAware(t *testing.T) {
	if os.Getenv("LOCTREE_MEASURE") != "loadaware" {
		t.Skip("a measurement: set LOCTREE_MEASURE=loadaware to run it")
	}
	d := 15 * time.Second
	if v := os.Getenv("LOCTREE_MEASURE_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("LOCTREE_MEASURE_SECONDS=%q: want a whole number of seconds, at least 1", v)
		}
		d = time.Duration(n) * time.Second
	}
	sc := loadZones()
	lb := startLoadBackends(t, sc)
	plane := newFilterPlane(t)
	for _, run := range []struct {
		name  string
		rates []float64
	}{{"overloaded", overloaded(sc)}, {"balanced", balanced(sc)}} {
		fmt.Printf("\n%s: offered %.0f / %.0f / %.0f requests per second, %s per configuration; before: %s\n",
			run.name, run.rates[0], run.rates[1], run.rates[2], d, uptime())
		fmt.Println("| configuration | requests | p50 | p99 | errors | local (all) | local (" + sc.zones[0].name() + ") |")
		fmt.Println("|---|---:|---:|---:|---:|---:|---:|")
		for _, cfg := range []lbConfig{staticLocality, loadAware, noLocality} {
			fmt.Println(runLoad(t, plane, sc, lb, cfg, run.rates, d).row())
		}
		fmt.Printf("after: %s\n", uptime())
	}
}

// uptime is the machine's load, as `uptime` prints it.
func uptime() string {
	out, err := exec.Command("uptime").Output()
	if err != nil {
		return "uptime: " + err.Error()
	}
	return strings.TrimSpace(string(out))
}
