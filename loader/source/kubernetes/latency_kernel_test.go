package kubernetes_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/loader"
	"github.com/loctree/loctree/loader/source/kubernetes"
)

// TestUpdateLatencyFromKubernetes: an EndpointSlice change through the fake
// API is observed once in the agent's loctree_update_latency_seconds, timed
// from the informer event's arrival: at least the source's debounce (the
// quiet time it waits before publishing), at most the time from the API
// call to seeing the metric, and counted in the buckets whose upper bound
// is at least the value (client_golang prometheus/histogram.go:877-893).
func TestUpdateLatencyFromKubernetes(t *testing.T) {
	kerneltest.RequireRoot(t)
	const debounce = 50 * time.Millisecond
	client := fake.NewClientset(kernelObjects()...)
	src, err := kubernetes.New(kubernetes.Config{Client: client, NodeName: "n1", ClusterID: "c1",
		Debounce: debounce, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	listen := kerneltest.FreeAddr(t)
	kubernetes.RunAgent(t, loader.AgentConfig{Source: src, Cgroup: kerneltest.Cgroup(t), Listen: listen,
		Logger: slog.New(slog.DiscardHandler)})
	waitLatencyCount(t, listen, 0) // the first update is no change
	before := time.Now()
	sl, _ := client.DiscoveryV1().EndpointSlices("default").Get(context.Background(), "reviews-a", metav1.GetOptions{})
	sl.Endpoints[0].Conditions.Ready = ptr.To(false)
	ok(t)(client.DiscoveryV1().EndpointSlices("default").Update(context.Background(), sl, metav1.UpdateOptions{}))
	h := waitLatencyCount(t, listen, 1)
	v, max := h.GetSampleSum(), time.Since(before).Seconds()
	if v < debounce.Seconds() || v > max {
		t.Fatalf("latency %gs, want in [%gs (the debounce), %gs]", v, debounce.Seconds(), max)
	}
	for _, b := range h.Bucket {
		if want := v <= b.GetUpperBound(); (b.GetCumulativeCount() == 1) != want {
			t.Errorf("le=%g holds %d for %gs", b.GetUpperBound(), b.GetCumulativeCount(), v)
		}
	}
}

// waitLatencyCount waits until the agent has installed a tree and has
// observed n update latencies, and returns that histogram.
func waitLatencyCount(t *testing.T, listen string, n uint64) *dto.Histogram {
	t.Helper()
	var h *dto.Histogram
	kerneltest.Eventually(t, 20*time.Second, fmt.Sprintf("%d update latencies", n), func() error {
		resp, err := http.Get("http://" + listen + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			return err
		}
		f := fams["loctree_update_latency_seconds"]
		if f == nil || fams["loctree_installs_total"].GetMetric()[0].GetCounter().GetValue() < 1 {
			return fmt.Errorf("nothing installed yet")
		}
		if h = f.Metric[0].GetHistogram(); h.GetSampleCount() != n {
			return fmt.Errorf("%d observed", h.GetSampleCount())
		}
		return nil
	})
	return h
}
