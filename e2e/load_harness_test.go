package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/loctree/loctree/shared"
)

// The load test's harness: one service in three zones of one region,
// backends with a fixed service time and bounded concurrency, and clients
// in each zone that send open-loop (Poisson) arrivals through a data plane
// (a loadPlane) at a rate per zone. What it measures per run: latency of
// the answered requests, the error rate, and the share of requests a
// backend of the client's own zone answered (docs/PERFORMANCE.md,
// "Load-aware widening under overload"). The backends are in
// load_backends_test.go, the clients and their outcomes in
// load_clients_test.go, the filter plane in load_planes_test.go.

// loadService is the service's name, and the Host its clients ask for.
const loadService = "la"

// loadZone is one zone: its locality and its endpoints' addresses.
type loadZone struct {
	loc       shared.Locality
	endpoints []string
}

func (z loadZone) name() string { return z.loc["zone"] }

// loadScenario is the service and its backends.
type loadScenario struct {
	zones []loadZone
	vip   string // the service's VIP, for the kernel plane
	// service is a request's time at a backend once a worker takes it.
	service time.Duration
	// workers is the requests a backend serves at once; queue the ones it
	// holds waiting beyond them. A request past both is answered 503 at
	// once (an overloaded server shedding load).
	workers, queue int
	// band is load_aware's {high, low}; nil: the default band.
	band map[string]any
}

// workersBand sets load_aware's band to the backends' concurrency: wide
// above workers in flight per endpoint, narrow below half of it. The
// kernel's counts are the node's (every connection of every process), so
// its band is the backend's whole concurrency; the filter's default band
// {2, 1} is per VM, and two VMs share a proxy's requests.
func (sc *loadScenario) workersBand() {
	sc.band = map[string]any{"high": sc.workers, "low": sc.workers / 2}
}

// capacity is the requests per second zone z's endpoints serve.
func (sc *loadScenario) capacity(z int) float64 {
	return float64(len(sc.zones[z].endpoints)*sc.workers) / sc.service.Seconds()
}

// zoneOf is the zone index of an endpoint address (-1: none).
func (sc *loadScenario) zoneOf(addr string) int {
	for i, z := range sc.zones {
		if slices.Contains(z.endpoints, addr) {
			return i
		}
	}
	return -1
}

// lbConfig is how the service balances across localities.
type lbConfig int

const (
	staticLocality lbConfig = iota // failover: the client's zone while it has an eligible endpoint
	loadAware                      // failover with load_aware: widen above the band
	noLocality                     // locality_lb: false, every endpoint
)

func (c lbConfig) String() string {
	return [...]string{"static locality", "load_aware", "no locality"}[c]
}

// topology is the scenario's topology file for c (JSON, which is also
// YAML: the filter reads it inline, the agent as a file).
func (sc *loadScenario) topology(c lbConfig) map[string]any {
	var eps []map[string]any
	for _, z := range sc.zones {
		for _, a := range z.endpoints {
			eps = append(eps, map[string]any{"address": a, "locality": z.loc})
		}
	}
	svc := map[string]any{"name": loadService, "vip": sc.vip, "scopes": []string{"region", "zone"}, "endpoints": eps}
	switch c {
	case loadAware:
		svc["load_aware"] = map[string]any{} // the default band, {high: 2, low: 1}
		if sc.band != nil {
			svc["load_aware"] = sc.band
		}
	case noLocality:
		svc["locality_lb"] = false
		delete(svc, "scopes") // which would have no effect: refused
	}
	return map[string]any{"services": []any{svc}}
}

// sendFunc sends one request of a client zone through the data plane and
// returns the status and the backend that answered ("" if none did).
type sendFunc func(ctx context.Context) (status int, backend string, err error)

// loadPlane is a data plane the load test drives. start sets it up for one
// topology (the JSON of loadScenario.topology) and returns, per zone of
// clients (in the scenario's order), how one of its clients sends a
// request; stop tears it down (a second call does nothing).
//
// The planes: filterPlane (a proxy per client zone running the filter) and
// kernelPlane (the agent, and a relay per client zone in a cgroup of its
// locality, one connection to the VIP per request).
type loadPlane interface {
	name() string
	start(ctx context.Context, topology []byte, clients []shared.Locality) (send []sendFunc, stop func(), err error)
}

// loadResult is one run of one configuration.
type loadResult struct {
	cfg   lbConfig
	zones []*zoneStats
}

// runLoad offers rates[z] requests per second from each zone's clients
// for d through plane set up for cfg, and waits for the backends to drain.
func runLoad(t *testing.T, plane loadPlane, sc *loadScenario, lb *loadBackends, cfg lbConfig, rates []float64, d time.Duration) *loadResult {
	t.Helper()
	res, err := tryLoad(t, plane, sc, lb, cfg, rates, d)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// tryLoad is runLoad, with an error where the plane does not start.
func tryLoad(t *testing.T, plane loadPlane, sc *loadScenario, lb *loadBackends, cfg lbConfig, rates []float64, d time.Duration) (*loadResult, error) {
	t.Helper()
	send, stop, err := startPlane(t, plane, sc, cfg)
	if err != nil {
		return nil, err
	}
	defer stop()
	res := &loadResult{cfg: cfg}
	var wg sync.WaitGroup
	for z := range sc.zones {
		stats := &zoneStats{}
		res.zones = append(res.zones, stats)
		wg.Add(1)
		go func() {
			defer wg.Done()
			offer(context.Background(), sc, z, send[z], rates[z], d, newRand(uint64(z)+1), stats)
		}()
	}
	wg.Wait()
	lb.drained(t)
	return res, nil
}

// startPlane starts plane for sc's topology under cfg, clients in every
// zone.
func startPlane(t *testing.T, plane loadPlane, sc *loadScenario, cfg lbConfig) ([]sendFunc, func(), error) {
	t.Helper()
	var locs []shared.Locality
	for _, z := range sc.zones {
		locs = append(locs, z.loc)
	}
	send, stop, err := plane.start(context.Background(), mustJSON(t, sc.topology(cfg)), locs)
	if err != nil {
		return nil, nil, fmt.Errorf("%s, %s: %w", plane.name(), cfg, err)
	}
	return send, stop, nil
}

// total merges the zones' outcomes (zones: indices; none means all).
func (r *loadResult) total(zones ...int) *zoneStats {
	if len(zones) == 0 {
		for z := range r.zones {
			zones = append(zones, z)
		}
	}
	out := &zoneStats{}
	for _, z := range zones {
		s := r.zones[z]
		out.sent += s.sent
		out.failed += s.failed
		out.reached += s.reached
		out.local += s.local
		out.latency = append(out.latency, s.latency...)
	}
	return out
}

// row is the result as a line of docs/PERFORMANCE.md's table: p50, p99,
// errors, local share of all clients and of the hot zone's (zone 0).
func (r *loadResult) row() string {
	all, hot := r.total(), r.total(0)
	return fmt.Sprintf("| %s | %d | %s | %s | %.1f %% | %.1f %% | %.1f %% |", r.cfg, all.sent,
		ms(all.quantile(0.50)), ms(all.quantile(0.99)), 100*all.errorRate(), 100*all.localShare(), 100*hot.localShare())
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
