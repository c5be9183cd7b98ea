package loader

import (
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// TestAgentTrafficMetrics: a real agent with --traffic-scope region, real
// connects from the node's cgroup (r1), a cgroup in r2 and one in a region
// with no endpoint (every endpoint a candidate): /metrics, read with
// Prometheus' parser, counts them per (source region, backend region)
// exactly as the backends' answers say, the cross count is the
// off-diagonal, and the no-locality count is, per connection, the share of
// the three endpoints (random: one each) outside the source's region.
// Each connection's bytes are in the same pair once it closed: it sent
// nothing but its SYN and FIN (2, the kernel's counters count sequence
// numbers) and received the backend's 16-byte address and FIN (17).
func TestAgentTrafficMetrics(t *testing.T) {
	kerneltest.RequireRoot(t)
	regionOf := map[string]string{"127.0.25.11:9125": "r1", "127.0.25.12:9125": "r1", "127.0.25.13:9125": "r2"}
	kerneltest.Backends(t, []string{"127.0.25.11:9125", "127.0.25.12:9125", "127.0.25.13:9125"})
	topo := filepath.Join(t.TempDir(), "mesh.yaml")
	os.WriteFile(topo, []byte(`services:
- name: t
  vip: 127.77.25.9:80
  scopes: [region, zone]
  endpoints:
  - {address: 127.0.25.11:9125, locality: {region: r1, zone: z1}}
  - {address: 127.0.25.12:9125, locality: {region: r1, zone: z2}}
  - {address: 127.0.25.13:9125, locality: {region: r2, zone: z3}}
`), 0o644)
	cg := kerneltest.Cgroup(t)
	sources := map[string]shared.Locality{cg: {"region": "r1", "zone": "z1"}}
	cgroups := map[string]shared.Locality{}
	for name, loc := range map[string]shared.Locality{"pod": {"region": "r2", "zone": "z3"}, "far": {"region": "r9"}} {
		dir := filepath.Join(cg, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { kerneltest.MoveTo(t, cg); os.Remove(dir) })
		sources[dir], cgroups[dir] = loc, loc
	}
	listen := kerneltest.FreeAddr(t)
	runAgent(t, AgentConfig{Topology: topo, Cgroup: cg, Locality: sources[cg], CgroupLocality: cgroups,
		Listen: listen, Watch: 10 * time.Millisecond, TrafficScope: "region"})
	// Ready at the first connect redirected: the sockops program is
	// attached before the connect programs, so its bytes count too.
	kerneltest.Eventually(t, 10*time.Second, "the agent ready", func() error {
		_, err := kerneltest.Ask("127.77.25.9:80")
		return err
	})
	kerneltest.MoveTo(t, cg)
	var before trafficScrape
	kerneltest.Eventually(t, 5*time.Second, "the readiness probe's bytes", func() error {
		before = scrapeTraffic(t, listen)
		return before.settled()
	})
	want := map[[2]string]float64{}
	var cross, noloc float64
	for dir, loc := range sources {
		kerneltest.MoveTo(t, dir)
		for range 20 {
			got, err := kerneltest.Ask("127.77.25.9:80")
			if err != nil {
				t.Fatal(err)
			}
			want[[2]string{loc["region"], regionOf[got]}]++
			if loc["region"] != regionOf[got] {
				cross++
			}
			noloc += map[string]float64{"r1": 1.0 / 3, "r2": 2.0 / 3, "r9": 1}[loc["region"]]
		}
	}
	kerneltest.MoveTo(t, cg)
	var after trafficScrape
	kerneltest.Eventually(t, 5*time.Second, "the closed connections' bytes", func() error {
		after = scrapeTraffic(t, listen)
		return after.settled()
	})
	got := map[[2]string]float64{}
	for pair, n := range after.pairs {
		if d := n - before.pairs[pair]; d != 0 {
			got[pair] = d
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("connections by (source, destination) region %v, want %v", got, want)
	}
	if c := after.cross - before.cross; c != cross {
		t.Errorf("cross-region connections %v, want %v", c, cross)
	}
	if n := after.noloc - before.noloc; math.Abs(n-noloc) > 1e-9 {
		t.Errorf("no-locality crossings %v, want %v", n, noloc)
	}
}

type trafficScrape struct {
	pairs, sent, received map[[2]string]float64
	cross, noloc          float64
}

// settled checks that every pair's bytes are those of its connections
// to kerneltest.Backends, all closed: each sends its SYN and FIN (2) and
// receives a 16-byte address and the FIN (17).
func (s trafficScrape) settled() error {
	for pair, n := range s.pairs {
		if got := [2]float64{s.sent[pair], s.received[pair]}; got != [2]float64{2 * n, 17 * n} {
			return fmt.Errorf("pair %v: %v connections sent and received %v bytes, want %v", pair, n, got, [2]float64{2 * n, 17 * n})
		}
	}
	return nil
}

// scrapeTraffic reads the traffic series at scope region from /metrics.
func scrapeTraffic(t *testing.T, listen string) trafficScrape {
	t.Helper()
	fams, err := scrape(listen)
	if err != nil {
		t.Fatal(err)
	}
	out := trafficScrape{pairs: map[[2]string]float64{}, sent: map[[2]string]float64{}, received: map[[2]string]float64{}}
	matrix(t, fams["loctree_traffic_connections_total"].GetMetric(), out.pairs)
	matrix(t, fams["loctree_traffic_sent_bytes_total"].GetMetric(), out.sent)
	matrix(t, fams["loctree_traffic_received_bytes_total"].GetMetric(), out.received)
	one := func(name string) float64 {
		ms := fams[name].GetMetric()
		if len(ms) != 1 {
			t.Fatalf("%s: %d series", name, len(ms))
		}
		return ms[0].GetCounter().GetValue()
	}
	out.cross, out.noloc = one("loctree_traffic_cross_connections_total"), one("loctree_traffic_nolocality_cross_connections_total")
	return out
}

// matrix reads one traffic matrix's series at scope region into out.
func matrix(t *testing.T, ms []*dto.Metric, out map[[2]string]float64) {
	t.Helper()
	for _, m := range ms {
		var src, dst, scope string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "source":
				src = l.GetValue()
			case "destination":
				dst = l.GetValue()
			case "scope":
				scope = l.GetValue()
			}
		}
		if scope != "region" {
			t.Fatalf("scope %q, want region", scope)
		}
		out[[2]string{src, dst}] = m.GetCounter().GetValue()
	}
}
