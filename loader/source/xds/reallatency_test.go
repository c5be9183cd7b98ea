package xds

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/loader"
	"github.com/loctree/loctree/loader/source"
)

// tap passes a source's updates to the agent and records, for each, when
// its first WDS response arrived (Update.Observed), when the agent got it,
// and when the agent had it live in the kernel and served (publish
// returned).
type tap struct {
	src  *Source
	seen chan tapped
}

type tapped struct {
	changed              []string
	arrived, given, live time.Time
}

func (t *tap) Run(ctx context.Context, publish func(source.Update) error) error {
	return t.src.Run(ctx, func(u source.Update) error {
		given := time.Now()
		err := publish(u)
		select {
		case t.seen <- tapped{u.Changed, u.Observed, given, time.Now()}:
		default:
		}
		return err
	})
}

// BenchmarkRealLatency measures a change's way from the API server to the
// kernel through a real istiod, at 1,000 Services (each with a Pod):
// for 200 readiness flips, the time from the API write returning to the
// WDS response arriving at the agent (istiod: its watch, its debounce
// PILOT_DEBOUNCE_AFTER, default 100 ms, and its push), then to the agent
// having the new tree live in the kernel and served. Run with istiod's
// default debounce and again with PILOT_DEBOUNCE_AFTER=1ms, which sets
// istiod's share apart. A benchmark, so that make test does not run it
// (about a minute); each run measures the 200 changes whatever b.N is
// (docs/PERFORMANCE.md).
func BenchmarkRealLatency(b *testing.B) {
	t := b
	kerneltest.RequireRoot(t)
	c := onRealIstiod(t)
	const services, changes = 1000, 200
	c.node(t, "a", "r1", "z1", "")
	pods := make([]realPod, services)
	for i := range pods {
		name := fmt.Sprintf("s%04d", i)
		c.service(t, realSvc{name: name, td: "PreferSameZone"})
		pods[i] = realPod{name: name, node: "a", ip: fmt.Sprintf("100.64.%d.%d", i/250, i%250+1), app: name, ready: true}
		c.pod(t, pods[i])
	}
	for _, debounce := range []string{"", "1ms"} {
		b.Run("debounce="+orDefault(debounce, "default"), func(b *testing.B) {
			t := b
			if debounce != "" {
				c.istiod.Kill()
				c.istiod.Env = []string{"PILOT_DEBOUNCE_AFTER=" + debounce}
				if err := c.istiod.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			for range b.N {
				measureLatency(b, c, pods, changes)
			}
		})
	}
}

func measureLatency(b *testing.B, c *realCluster, pods []realPod, changes int) {
	t := b
	src, err := New(Config{Address: c.istiod.XDSAddress(), NodeName: c.nodeName("a"), Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	tp := &tap{src: src, seen: make(chan tapped, 16)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- loader.Run(ctx, loader.AgentConfig{Source: tp, Cgroup: kerneltest.Cgroup(t), BPFFS: kerneltest.BPFFS(t), Logger: discard()})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	}()
	first := wait(t, tp.seen, func(u tapped) bool { return len(u.changed) >= len(pods) })
	t.Logf("first complete state: %d tree services", len(first.changed))
	var toWDS, toKernel, total []time.Duration
	for i := range changes {
		p := &pods[(i*7)%len(pods)]
		p.ready = !p.ready
		name := c.fqdn(p.name)
		c.setReady(t, *p)
		wrote := time.Now()
		u := wait(t, tp.seen, func(u tapped) bool { return slices.Contains(u.changed, name) })
		toWDS, toKernel, total = append(toWDS, u.arrived.Sub(wrote)), append(toKernel, u.live.Sub(u.arrived)), append(total, u.live.Sub(wrote))
	}
	b.StopTimer()
	for _, m := range []struct {
		what, unit string
		l          []time.Duration
	}{{"API write → WDS response at the agent (istiod)", "istiod", toWDS}, {"WDS response → live in the kernel (agent)", "agent", toKernel}, {"API write → live in the kernel", "total", total}} {
		p50, p99, max := percentiles(m.l)
		b.ReportMetric(float64(p50.Microseconds())/1000, m.unit+"-p50-ms")
		b.ReportMetric(float64(p99.Microseconds())/1000, m.unit+"-p99-ms")
		t.Logf("%s over %d changes at %d services: p50 %v, p99 %v, max %v", m.what, changes, len(pods), p50.Round(time.Millisecond/10), p99.Round(time.Millisecond/10), max.Round(time.Millisecond/10))
	}
}

// wait returns the first update that cond accepts.
func wait(t testing.TB, seen <-chan tapped, cond func(tapped) bool) tapped {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case u := <-seen:
			if cond(u) {
				return u
			}
		case <-deadline:
			t.Fatal("the change never reached the kernel")
		}
	}
}

// percentiles sorts l and returns its median, 99th percentile and maximum.
func percentiles(l []time.Duration) (p50, p99, max time.Duration) {
	slices.Sort(l)
	return l[len(l)/2], l[min(len(l)-1, len(l)*99/100)], l[len(l)-1]
}
