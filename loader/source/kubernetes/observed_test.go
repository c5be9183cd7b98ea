package kubernetes

import (
	"context"
	"log/slog"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestUpdateObservedAtEventArrival: an update carries the time the first
// informer event of its batch arrived (the start of the agent's change →
// kernel latency), not the time it was published: at least Debounce before
// the publish (the source waits that long with no further event), and not
// before the API call that caused the event.
func TestUpdateObservedAtEventArrival(t *testing.T) {
	const debounce = 40 * time.Millisecond
	svc := service("ns", "s", "PreferClose", []string{"127.77.0.50"}, 80)
	sl := slice("ns", "s", "s-a", "IPv4", []ep{{addr: "127.0.5.1", node: "n1"}}, 1080)
	client := newClient(asObjects([]any{svc, sl}, clusterNodes())...)
	src, err := New(Config{Client: client, NodeName: "n1", ClusterID: "c1", Debounce: debounce,
		MaxDelay: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{ch: make(chan struct{}, 1)}
	published := make(chan time.Time, 8)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- src.Run(ctx, func(u Update) error { published <- time.Now(); return c.publish(u) })
	}()
	defer func() { cancel(); <-done }()
	c.waitFor(t, 0, "the first update", func(u Update) bool { return len(u.Topology.Services) == 1 })
	<-published

	before := time.Now()
	sl.Endpoints[0].Conditions.Ready = healthy(false)
	if _, err := client.DiscoveryV1().EndpointSlices("ns").Update(context.Background(), sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	u := c.waitFor(t, 1, "the endpoint unready", func(u Update) bool { return len(u.Changed) == 1 })
	at := <-published
	switch {
	case u.Observed.IsZero():
		t.Fatal("the update carries no observed time")
	case u.Observed.Before(before):
		t.Fatalf("observed %v before the API call at %v", u.Observed, before)
	case at.Sub(u.Observed) < debounce:
		t.Fatalf("observed %v before the publish, want at least the debounce %v (the event's arrival, not the publish)", at.Sub(u.Observed), debounce)
	}
}
