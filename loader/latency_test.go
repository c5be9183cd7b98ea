package loader

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/loctree/loctree/internal/testing/kerneltest"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestUpdateLatencyAsClientGolang: the change → kernel histograms count
// each observation in the buckets Prometheus' client library puts it in
// (client_golang prometheus/histogram.go:870-893, findBucket: the first
// bucket whose upper bound is >= the value, so a value equal to a bound
// counts in that bucket) with the same sum and count, per stage too. The
// oracle is client_golang itself, fed the same durations; our text is read
// back with Prometheus' text parser.
func TestUpdateLatencyAsClientGolang(t *testing.T) {
	stages := [][2]time.Duration{ // source → build, build → kernel
		{time.Millisecond, 4 * time.Millisecond},       // 0.005 exactly: le="0.005"
		{50 * time.Microsecond, 0},                     // below every bound
		{90 * time.Millisecond, 10 * time.Millisecond}, // 0.1 exactly
		{2 * time.Second, 700 * time.Millisecond},
		{9 * time.Second, 3 * time.Second}, // above 10 s: only +Inf
	}
	reg := prometheus.NewRegistry()
	total := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "loctree_update_latency_seconds", Buckets: prometheus.DefBuckets})
	stage := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "loctree_update_stage_seconds", Buckets: prometheus.DefBuckets}, []string{"stage"})
	reg.MustRegister(total, stage)
	m := newMetrics("")
	base := time.Unix(1_800_000_000, 0)
	for _, s := range stages {
		m.updated(base, base.Add(s[0]), base.Add(s[0]+s[1]))
		total.Observe((s[0] + s[1]).Seconds())
		stage.WithLabelValues("build").Observe(s[0].Seconds())
		stage.WithLabelValues("kernel").Observe(s[1].Seconds())
	}
	want, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := parseMetrics(t, m)
	for _, w := range want {
		g, ok := got[w.GetName()]
		if !ok {
			t.Fatalf("%s not exported", w.GetName())
		}
		compareHistograms(t, w, g)
	}
}

func parseMetrics(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	var buf bytes.Buffer
	if _, err := m.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(&buf)
	if err != nil {
		t.Fatalf("our text does not parse: %v\n%s", err, buf.String())
	}
	return fams
}

// compareHistograms compares the series of two histogram families by labels.
func compareHistograms(t *testing.T, want, got *dto.MetricFamily) {
	t.Helper()
	if got.GetType() != dto.MetricType_HISTOGRAM || len(got.Metric) != len(want.Metric) {
		t.Fatalf("%s: type %v with %d series, want a histogram with %d", want.GetName(), got.GetType(), len(got.Metric), len(want.Metric))
	}
	for i, w := range want.Metric {
		g, wh := got.Metric[i], w.GetHistogram()
		gh := g.GetHistogram()
		if labels(g) != labels(w) || gh.GetSampleCount() != wh.GetSampleCount() || math.Abs(gh.GetSampleSum()-wh.GetSampleSum()) > 1e-9 {
			t.Errorf("%s{%s}: count %d sum %g, want {%s} count %d sum %g", want.GetName(), labels(g), gh.GetSampleCount(), gh.GetSampleSum(), labels(w), wh.GetSampleCount(), wh.GetSampleSum())
		}
		// Gather leaves +Inf implicit (the count); the text has it last.
		if n := len(gh.Bucket); n > 0 && math.IsInf(gh.Bucket[n-1].GetUpperBound(), 1) {
			if gh.Bucket[n-1].GetCumulativeCount() != gh.GetSampleCount() {
				t.Errorf("%s{%s}: +Inf bucket %d, count %d", want.GetName(), labels(g), gh.Bucket[n-1].GetCumulativeCount(), gh.GetSampleCount())
			}
			gh.Bucket = gh.Bucket[:n-1]
		}
		if len(gh.Bucket) != len(wh.Bucket) {
			t.Fatalf("%s: %d buckets, want %d", want.GetName(), len(gh.Bucket), len(wh.Bucket))
		}
		for j, wb := range wh.Bucket {
			if gb := gh.Bucket[j]; gb.GetUpperBound() != wb.GetUpperBound() || gb.GetCumulativeCount() != wb.GetCumulativeCount() {
				t.Errorf("%s{%s}: bucket le=%g count %d, want le=%g count %d", want.GetName(), labels(w), gb.GetUpperBound(), gb.GetCumulativeCount(), wb.GetUpperBound(), wb.GetCumulativeCount())
			}
		}
	}
}

func labels(m *dto.Metric) string {
	var s string
	for _, l := range m.Label {
		s += l.GetName() + "=" + l.GetValue() + ","
	}
	return s
}

// TestUpdateLatencyFromFile: a change of the topology file is observed once
// in loctree_update_latency_seconds, with a value no longer than the time
// from writing the file to seeing the metric, in the bucket client_golang's
// findBucket rule gives that value (histogram.go:877-893), and stages that
// add up to it. The first install is no change and is not observed.
func TestUpdateLatencyFromFile(t *testing.T) {
	kerneltest.RequireRoot(t)
	cfg := oneServiceAgent(t, "127.77.3.2:80", "127.0.22.3:9400")
	runAgent(t, cfg)
	kerneltest.Eventually(t, 10*time.Second, "the first install", func() error {
		fams, err := scrape(cfg.Listen)
		if err == nil && fams["loctree_installs_total"].GetMetric()[0].GetCounter().GetValue() < 1 {
			err = errors.New("not installed yet")
		}
		return err
	})
	waitLatencies(t, cfg.Listen, 0)
	yaml := "services:\n- name: one\n  vip: 127.77.3.2:80\n  scopes: [region]\n  endpoints:\n  - address: 127.0.22.4:9400\n    locality: {region: r1}\n"
	before := time.Now()
	if err := os.WriteFile(cfg.Topology, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	fams := waitLatencies(t, cfg.Listen, 1)
	checkOneLatency(t, fams, time.Since(before))
}

// checkOneLatency: one observation, at most max, in the right bucket, with
// build and kernel stages that sum to it.
func checkOneLatency(t *testing.T, fams map[string]*dto.MetricFamily, max time.Duration) {
	t.Helper()
	h := fams["loctree_update_latency_seconds"].Metric[0].GetHistogram()
	v := h.GetSampleSum()
	if h.GetSampleCount() != 1 || v <= 0 || v > max.Seconds() {
		t.Fatalf("%d observations summing to %gs; want 1 in (0, %gs]", h.GetSampleCount(), v, max.Seconds())
	}
	for _, b := range h.Bucket {
		if want := uint64(boolToInt(v <= b.GetUpperBound())); b.GetCumulativeCount() != want {
			t.Errorf("le=%g holds %d, want %d for %gs", b.GetUpperBound(), b.GetCumulativeCount(), want, v)
		}
	}
	var stages float64
	for _, s := range fams["loctree_update_stage_seconds"].Metric {
		stages += s.GetHistogram().GetSampleSum()
	}
	if math.Abs(stages-v) > 1e-6 {
		t.Errorf("stages sum to %gs, the total is %gs", stages, v)
	}
}

func latencyCount(fams map[string]*dto.MetricFamily) uint64 {
	f := fams["loctree_update_latency_seconds"]
	if f == nil {
		return 0
	}
	return f.Metric[0].GetHistogram().GetSampleCount()
}

// scrape reads the agent's /metrics with Prometheus' text parser.
func scrape(listen string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get("http://" + listen + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// waitLatencies waits until the agent has observed n update latencies.
func waitLatencies(t *testing.T, listen string, n uint64) map[string]*dto.MetricFamily {
	t.Helper()
	var fams map[string]*dto.MetricFamily
	kerneltest.Eventually(t, 10*time.Second, fmt.Sprintf("%d update latencies observed", n), func() error {
		var err error
		if fams, err = scrape(listen); err != nil {
			return err
		}
		if got := latencyCount(fams); got != n {
			return fmt.Errorf("%d observed", got)
		}
		return nil
	})
	return fams
}
