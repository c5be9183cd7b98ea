package dashboards

import (
	"bufio"
	"context"
	"encoding/json"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/loctree/loctree/host"
	"github.com/loctree/loctree/internal/testing/wasmtest"
	"github.com/loctree/loctree/istio"
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
	byLabels  = regexp.MustCompile(`\bby \(([^)]*)\)`)
	replaced  = regexp.MustCompile(`label_replace\(.*?\),\s*"([a-zA-Z_]+)"`)
	// matcher is a label matcher once its value is stripped: its label
	// name is no metric name.
	matcher = regexp.MustCompile(`\b[a-zA-Z_][a-zA-Z0-9_]*\s*(?:=~|!~|!=|=)\s*""`)
)

// targetLabels are the labels Prometheus adds to every scraped series (the
// job's target labels: Istio's sample scrape config and a PodMonitor both
// set namespace and pod).
var targetLabels = []string{"instance", "job", "namespace", "pod"}

// TestDashboardQueriesExportedMetrics: every metric name the dashboard
// queries, bare or as a __name__ regex, is one the agent exports (the
// Prometheus text its Metrics write, pinned by loader/testdata/metrics.golden)
// or one the real filter .wasm defines, under the name an Istio proxy with
// istio/mesh/istiod-values.yaml exports it (the host's StatTags: Envoy
// strips the wasmcustom namespace, source/extensions/common/wasm/
// stats_handler.h, adds no envoy_ prefix to a custom namespace's metrics,
// source/server/admin/prometheus_stats.cc, PrometheusStatsFormatter::
// metricName, and takes the extraStatTags out of the name as labels). Every
// label a query groups by is one of those metrics' labels, a target label,
// or one the query makes with label_replace.
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(Loctree)))
	if err := dec.Decode(&d); err != nil {
		t.Fatal(err)
	}
	exported := agentMetrics(t)
	maps.Copy(exported, filterMetrics(t))
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
			labels := slices.Clone(targetLabels)
			for _, name := range queriedNames(t, p.Title, tg.Expr, exported) {
				queried[name] = true
				labels = append(labels, exported[name]...)
			}
			for _, m := range replaced.FindAllStringSubmatch(tg.Expr, -1) {
				labels = append(labels, m[1])
			}
			for _, m := range byLabels.FindAllStringSubmatch(tg.Expr, -1) {
				for _, l := range strings.Split(m[1], ",") {
					if l = strings.TrimSpace(l); !slices.Contains(labels, l) {
						t.Errorf("panel %q groups by %q, a label none of its metrics has", p.Title, l)
					}
				}
			}
		}
	}
	for _, want := range []string{"loctree_picks_depth_0_total", "loctree_picks_depth_4_total", "loctree_service_picks_total", "loctree_service_no_candidate_total",
		"loctree_kernel_refused_total", "loctree_generation", "loctree_tree_generation", "loctree_update_latency_seconds_bucket",
		"loctree_update_stage_seconds_bucket", "loctree_install_duration_seconds_bucket", "loctree_tree_requests_total",
		"loctree_traffic_connections_total", "loctree_traffic_requests_total", "loctree_traffic_nolocality_cross_connections_total",
		"loctree_traffic_nolocality_cross_requests_total", "loctree_traffic_cross_connections_total", "loctree_traffic_cross_requests_total",
		"loctree_traffic_sent_bytes_total", "loctree_traffic_received_bytes_total"} {
		if !queried[want] {
			t.Errorf("the dashboard does not query %s", want)
		}
	}
}

// queriedNames are the exported metrics an expression queries; a name
// nothing exports is an error.
func queriedNames(t *testing.T, panel, expr string, exported map[string][]string) []string {
	t.Helper()
	var out []string
	bare := matcher.ReplaceAllString(quoted.ReplaceAllString(expr, `""`), "")
	for _, name := range bareName.FindAllString(byLabels.ReplaceAllString(bare, ""), -1) {
		if _, ok := exported[name]; !ok {
			t.Errorf("panel %q queries %s, which nothing exports", panel, name)
		}
		out = append(out, name)
	}
	for _, m := range nameRegex.FindAllStringSubmatch(expr, -1) {
		re := regexp.MustCompile("^(?:" + m[1] + ")$")
		n := len(out)
		for name := range exported {
			if re.MatchString(name) {
				out = append(out, name)
			}
		}
		if len(out) == n {
			t.Errorf("panel %q: __name__=~%q matches no exported metric", panel, m[1])
		}
	}
	return out
}

// agentMetrics are the series names of the agent's Prometheus text, with
// their labels.
func agentMetrics(t *testing.T) map[string][]string {
	t.Helper()
	data, err := os.ReadFile("../loader/testdata/metrics.golden")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		line := sc.Text()
		if name, typ, ok := strings.Cut(strings.TrimPrefix(line, "# TYPE "), " "); ok && strings.HasPrefix(line, "# TYPE ") {
			out[name] = nil
			if typ == "histogram" {
				out[name+"_bucket"], out[name+"_sum"], out[name+"_count"] = []string{"le"}, nil, nil
			}
			continue
		}
		name, rest, ok := strings.Cut(line, "{")
		if _, known := out[name]; !ok || !known || strings.HasPrefix(line, "#") {
			continue
		}
		for _, kv := range strings.Split(strings.Split(rest, "}")[0], ",") {
			if l, _, _ := strings.Cut(kv, "="); !slices.Contains(out[name], l) {
				out[name] = append(out[name], l)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no metric in loader/testdata/metrics.golden")
	}
	return out
}

// filterConfig is a proxy in r1/z1 with one service it can steer (s) and
// one strict service with no endpoint in its region (far).
const filterConfig = `{"locality":{"region":"r1","zone":"z1"},"topology":{"services":[
 {"name":"s.ns.svc.cluster.local","hosts":["s"],"scopes":["region","zone"],"endpoints":[{"address":"127.0.5.1:80","locality":{"region":"r1","zone":"z1"}}]},
 {"name":"far.ns.svc.cluster.local","hosts":["far"],"mode":"strict","scopes":["region"],"endpoints":[{"address":"127.0.5.2:80","locality":{"region":"r2"}}]}]}}`

// filterMetrics are the metrics the real filter defines once it has
// steered a request and refused one, as an Istio proxy with the shipped
// extraStatTags exports them, with their labels.
func filterMetrics(t *testing.T) map[string][]string {
	t.Helper()
	module := wasmtest.Bytes(t, "../filter")
	ctx := context.Background()
	h, err := host.New(ctx, module, host.Options{PluginConfig: []byte(filterConfig), ManualTicks: true,
		StatTags: host.IstioStatTags(shippedStatTags(t)...)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	vm, err := h.NewVM(ctx)
	if err != nil {
		t.Fatalf("filter start: %v (logs %v)", err, h.Logs())
	}
	defer vm.Close()
	for _, authority := range []string{"s", "far"} {
		req := &host.Request{Headers: host.Headers{{":method", "GET"}, {":path", "/"}, {":scheme", "http"}, {":authority", authority}}}
		if _, err := vm.Do(ctx, req, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := vm.Tick(); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, m := range h.Metrics().Snapshot() {
		for _, tag := range m.Tags {
			if !slices.Contains(out[m.Prometheus], tag.Name) {
				out[m.Prometheus] = append(out[m.Prometheus], tag.Name)
			}
		}
		if _, ok := out[m.Prometheus]; !ok {
			out[m.Prometheus] = nil
		}
	}
	if _, ok := out["loctree_tree_generation"]; !ok {
		t.Fatalf("the filter defines %v", out)
	}
	return out
}

// shippedStatTags are the extraStatTags of istio/mesh/istiod-values.yaml.
func shippedStatTags(t *testing.T) []string {
	t.Helper()
	data, err := istio.Files.ReadFile("mesh/istiod-values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		MeshConfig struct {
			DefaultConfig struct {
				ExtraStatTags []string `json:"extraStatTags"`
			} `json:"defaultConfig"`
		} `json:"meshConfig"`
	}
	if err := yaml.UnmarshalStrict(data, &v); err != nil {
		t.Fatal(err)
	}
	return v.MeshConfig.DefaultConfig.ExtraStatTags
}

// TestDashboardZoneMatrices: each plane has a zone × zone table: an
// instant query grouped by exactly the two labels that a groupingToMatrix
// transformation turns into its rows (source) and columns (destination).
func TestDashboardZoneMatrices(t *testing.T) {
	var d struct {
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr    string `json:"expr"`
				Instant bool   `json:"instant"`
			} `json:"targets"`
			Transformations []struct {
				ID      string `json:"id"`
				Options struct {
					RowField    string `json:"rowField"`
					ColumnField string `json:"columnField"`
				} `json:"options"`
			} `json:"transformations"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(Loctree, &d); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{
		"loctree_traffic_connections_total": {"source", "destination"},
		"loctree_traffic_requests_total":    {"loctree_traffic_source", "loctree_traffic_destination"},
	}
	for _, p := range d.Panels {
		if p.Type != "table" || len(p.Targets) != 1 || len(p.Transformations) != 1 {
			continue
		}
		tr, tg := p.Transformations[0], p.Targets[0]
		for metric, fields := range want {
			if !strings.Contains(tg.Expr, metric) {
				continue
			}
			by := byLabels.FindStringSubmatch(tg.Expr)
			if tr.ID != "groupingToMatrix" || !tg.Instant || by == nil || by[1] != fields[0]+", "+fields[1] ||
				tr.Options.RowField != fields[0] || tr.Options.ColumnField != fields[1] {
				t.Errorf("panel %q: %s grouped by %v into a %s of rows %q and columns %q (instant %v); want %v",
					p.Title, metric, by, tr.ID, tr.Options.RowField, tr.Options.ColumnField, tg.Instant, fields)
			}
			delete(want, metric)
		}
	}
	if len(want) > 0 {
		t.Errorf("no zone × zone table for %v", slices.Collect(maps.Keys(want)))
	}
}
