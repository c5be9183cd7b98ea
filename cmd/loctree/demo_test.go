package main

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/loctree/loctree/cmd/loctree/demo"
	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/internal/testing/wasmtest"
	"github.com/loctree/loctree/shared"
)

// TestDemo runs `loctree demo` for a few seconds and checks the spread it
// reports on both planes against the candidate sets shared computes for
// each phase's topology, and that it leaves no mount behind.
func TestDemo(t *testing.T) {
	// The demo mounts cgroup2 and bpffs itself; these skip (or fail under
	// LOCTREE_REQUIRE_KERNEL) with the reason where the kernel lacks them.
	kerneltest.Cgroup(t)
	kerneltest.BPFFS(t)
	mod := wasmtest.Build(t, "../../filter")
	code, out, errs := runCLI(t, "demo", "--duration", "3s", "--module", mod, "--cache-dir", cacheDir(), "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(errs, "running the demo for 3s") {
		t.Errorf("-o json said nothing of what it waits for: stderr %q", errs)
	}
	var sum demo.Summary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(sum.Phases) != 3 || sum.Interrupted {
		t.Fatalf("phases %d, interrupted %v: %s", len(sum.Phases), sum.Interrupted, out)
	}
	for i, ph := range sum.Phases {
		top := demo.Mesh(ph.Name == "failover")
		for _, s := range ph.Sources {
			want := candidateSet(t, top, s.Locality)
			if !slices.Equal(s.Candidates, want) {
				t.Errorf("%s from %s: reported candidates %v, shared says %v", ph.Name, s.Name, s.Candidates, want)
			}
			for plane, sp := range map[string]demo.Spread{"kernel": s.Kernel, "l7": s.L7} {
				if sp.Total < 10 || sp.Errors != 0 || sp.Outside != 0 {
					t.Errorf("phase %d %s from %s, %s: %d answers, %d errors (%s), %d outside the candidates",
						i, ph.Name, s.Name, plane, sp.Total, sp.Errors, sp.LastError, sp.Outside)
				}
				for addr := range sp.Endpoints {
					if !slices.Contains(want, addr) {
						t.Errorf("%s from %s, %s: reached %s, not a candidate %v", ph.Name, s.Name, plane, addr, want)
					}
				}
			}
			if ph.Name == "failover" && s.Name == "us-east-1a" && (s.L7.Localities["us-east/us-east-1b"] != s.L7.Total ||
				s.Kernel.Localities["us-east/us-east-1b"] != s.Kernel.Total) {
				t.Errorf("failover from us-east-1a did not all land in us-east-1b: kernel %v, L7 %v", s.Kernel.Localities, s.L7.Localities)
			}
		}
	}
	checkDemoTraffic(t, &sum)
	if mi, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mi), "loctree-demo") {
		t.Errorf("a demo mount is left:\n%s", mi)
	}
}

func candidateSet(t *testing.T, top *shared.Topology, src shared.Locality) []string {
	tree, err := shared.Build(top, shared.BuildOptions{Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	svc, _ := tree.Service(demo.ServiceName)
	r := svc.Lookup(src)
	var out []string
	for i := r.Lo; i < r.Hi; i++ {
		out = append(out, tree.Endpoint(i).Addr.String())
	}
	return out
}

// TestDemoFormats: -o takes yaml as every data command does (checked before
// anything runs), and refuses what it does not know.
func TestDemoFormats(t *testing.T) {
	if code, _, errs := runCLI(t, "demo", "--duration", "1s", "-o", "yaml"); code == 0 || !strings.Contains(errs, "--duration 1s") {
		t.Errorf("-o yaml: exit %d, %q; want the format accepted and the duration refused", code, errs)
	}
	if code, _, errs := runCLI(t, "demo", "-o", "xml"); code == 0 || !strings.Contains(errs, "unknown output format") {
		t.Errorf("-o xml: exit %d, %q", code, errs)
	}
}

// checkDemoTraffic: each plane's zone × zone counters, as the agent's
// /metrics and the filters' stats report them, hold exactly the answers
// the demo saw per source zone and backend zone; the cross counts are
// the off-diagonal; the no-locality count is, per answer, the share of the
// phase's healthy endpoints (the service is random: one each) outside the
// source's zone, worked from demo.Mesh's spec (the filter carries
// fractions per VM, so it may be up to one short per proxy).
func checkDemoTraffic(t *testing.T, sum *demo.Summary) {
	t.Helper()
	want := map[string]map[string]map[string]uint64{"kernel": {}, "l7": {}}
	noloc := map[string]float64{}
	for _, ph := range sum.Phases {
		var eligible []shared.EndpointSpec
		for _, e := range demo.Mesh(ph.Name == "failover").Services[0].Endpoints {
			if (e.Healthy == nil || *e.Healthy) && !e.Degraded {
				eligible = append(eligible, e)
			}
		}
		for _, s := range ph.Sources {
			out := 0
			for _, e := range eligible {
				if e.Locality["zone"] != s.Locality["zone"] {
					out++
				}
			}
			for plane, sp := range map[string]demo.Spread{"kernel": s.Kernel, "l7": s.L7} {
				for loc, n := range sp.Localities {
					_, zone, _ := strings.Cut(loc, "/")
					row := want[plane][s.Locality["zone"]]
					if row == nil {
						row = map[string]uint64{}
						want[plane][s.Locality["zone"]] = row
					}
					row[zone] += uint64(n)
				}
				noloc[plane] += float64(sp.Total) * float64(out) / float64(len(eligible))
			}
		}
	}
	for plane, m := range map[string]demo.Matrix{"kernel": sum.Traffic.Kernel, "l7": sum.Traffic.L7} {
		var cross uint64
		for src, row := range want[plane] {
			for dst, n := range row {
				if got := m.Counts[src][dst]; got != n {
					t.Errorf("%s counters: %s → %s = %d, the demo saw %d (counters %v)", plane, src, dst, got, n, m.Counts)
				}
				if src != dst {
					cross += n
				}
			}
		}
		if m.Cross != float64(cross) || m.NoLocality > noloc[plane]+1e-6 || m.NoLocality < noloc[plane]-float64(len(sum.Phases[0].Sources)) {
			t.Errorf("%s: cross %v, no-locality %v; want %d and %.3f", plane, m.Cross, m.NoLocality, cross, noloc[plane])
		}
	}
}
