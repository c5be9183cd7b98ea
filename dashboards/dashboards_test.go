package dashboards

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/loctree/loctree/host"
	"github.com/loctree/loctree/internal/wasmtest"
)

type dashboard struct {
	Title  string `json:"title"`
	UID    string `json:"uid"`
	Panels []struct {
		ID      int    `json:"id"`
		Type    string `json:"type"`
		Title   string `json:"title"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

var (
	// quoted strips the strings of a PromQL expression (label values,
	// label_replace arguments) before bare metric names are looked for.
	quoted    = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	bareName  = regexp.MustCompile(`\bloctree_[a-zA-Z0-9_]*`)
	nameRegex = regexp.MustCompile(`__name__=~"([^"]*)"`)
)

// TestDashboardQueriesExportedMetrics: every metric name the dashboard
// queries, bare or as a __name__ regex, is one the agent exports (the
// Prometheus text its Metrics write, pinned by loader/testdata/metrics.golden)
// or one the filter defines when the real filter .wasm starts in the wazero
// host (Envoy exports a Wasm plugin's metrics under the name it defines:
// source/extensions/common/wasm/stats_handler.h, the wasmcustom namespace
// "is removed from the final output", and
// source/server/admin/prometheus_stats.cc, PrometheusStatsFormatter::metricName,
// adds no envoy_ prefix to metrics of a custom namespace).
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(Loctree)))
	if err := dec.Decode(&d); err != nil {
		t.Fatal(err)
	}
	exported := append(agentMetrics(t), filterMetrics(t)...)
	queried := map[string]bool{}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, name := range bareName.FindAllString(quoted.ReplaceAllString(tg.Expr, `""`), -1) {
				queried[name] = true
				if !slices.Contains(exported, name) {
					t.Errorf("panel %q queries %s, which nothing exports", p.Title, name)
				}
			}
			for _, m := range nameRegex.FindAllStringSubmatch(tg.Expr, -1) {
				re := regexp.MustCompile("^(?:" + m[1] + ")$")
				var n int
				for _, name := range exported {
					if re.MatchString(name) {
						queried[name] = true
						n++
					}
				}
				if n == 0 {
					t.Errorf("panel %q: __name__=~%q matches no exported metric", p.Title, m[1])
				}
			}
		}
	}
	for _, want := range []string{"loctree_picks_depth_0_total", "loctree_picks_depth_4_total", "loctree_kernel_refused_total", "loctree_generation", "loctree_tree_generation", "loctree_install_duration_seconds_bucket", "loctree_tree_requests_total"} {
		if !queried[want] {
			t.Errorf("the dashboard does not query %s", want)
		}
	}
}

// agentMetrics are the series names of the agent's Prometheus text.
func agentMetrics(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("../loader/testdata/metrics.golden")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, typ, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "# TYPE "), " ")
		if !ok || !strings.HasPrefix(sc.Text(), "# TYPE ") {
			continue
		}
		out = append(out, name)
		if typ == "histogram" {
			out = append(out, name+"_bucket", name+"_sum", name+"_count")
		}
	}
	if len(out) == 0 {
		t.Fatal("no metric in loader/testdata/metrics.golden")
	}
	return out
}

// filterMetrics are the metrics the real filter defines when it starts.
func filterMetrics(t *testing.T) []string {
	t.Helper()
	module := wasmtest.Bytes(t, "../filter")
	conf, err := os.ReadFile("../examples/plugin.json")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	h, err := host.New(ctx, module, host.Options{PluginConfig: conf, ManualTicks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	vm, err := h.NewVM(ctx)
	if err != nil {
		t.Fatalf("filter start: %v (logs %v)", err, h.Logs())
	}
	defer vm.Close()
	var out []string
	for _, m := range h.Metrics().Snapshot() {
		out = append(out, m.Name)
	}
	if !slices.Contains(out, "loctree_tree_generation") {
		t.Fatalf("the filter defines %v", out)
	}
	return out
}
