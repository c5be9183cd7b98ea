package loader

import (
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/internal/promtext"
	"github.com/loctree/loctree/loader/kernel"
	"github.com/loctree/loctree/shared"
)

// installBuckets are the upper bounds (seconds) of the install latency
// histogram.
var installBuckets = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5}

// updateBuckets are the upper bounds (seconds) of the change → kernel
// latency histograms: Prometheus' default buckets, which span the
// Kubernetes source's debounce (100 ms) and its longest hold (1 s).
var updateBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Metrics are the agent's counters, served in the Prometheus text format.
type Metrics struct {
	mu            sync.Mutex
	installs      uint64
	errors        uint64
	rewritten     uint64
	install       histogram
	latency       histogram    // change seen by the source → live in the kernel
	stages        [2]histogram // source → built, built → kernel
	services      int
	endpoints     int
	gen           uint64
	pinsLost      bool
	refused       int // a source's services the tree refuses (agent.refused)
	kernelRefused int // services of the installed tree the kernel does not install (kernel.Result.Refused)
	warnings      int // warnings of the installed tree (agent.warned)
	kernel        func() ([bpf.StatCount]uint64, error)
	picks         func() ([]uint64, error)                                    // the kernel's picks by priority (kernel.priorityPicks)
	fetches       treeFetches                                                 // the filters' /v1/tree polls (treefetches.go)
	source        func() error                                                // the source's Health; nil: it has none
	extra         func(io.Writer) error                                       // the source's own metrics (source.Metrics); nil: none
	traffic       func() ([]kernel.TrafficCount, kernel.TrafficTotals, error) // the kernel's traffic counts (kernel.Installer.Traffic)
	forgetTraffic func([]kernel.TrafficCount) (int, error)                    // deletes stale ones (kernel.Installer.ForgetTraffic)
	tally         *trafficTally                                               // those counts at the traffic scope (traffic.go)
	tree          *shared.Tree                                                // the tree installed last, which places the counts
}

func newMetrics(trafficScope string) *Metrics {
	m := &Metrics{install: newHistogram(installBuckets), latency: newHistogram(updateBuckets), tally: newTrafficTally(trafficScope)}
	for i := range m.stages {
		m.stages[i] = newHistogram(updateBuckets)
	}
	return m
}

// installed records a successful Apply of tree.
func (m *Metrics) installed(tree *shared.Tree, r kernel.Result) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.readTraffic() // the picks so far are placed with the tree they were made with
	m.tree = tree
	m.installs++
	m.rewritten += uint64(r.Rewritten)
	m.services, m.endpoints, m.gen = r.Services, r.Endpoints, r.Generation
	m.kernelRefused = len(r.Refused)
	m.install.observe(r.Duration)
}

// updated records a change the source saw at observed, built into a tree
// at built and live in the kernel (and served to the filters) at live.
func (m *Metrics) updated(observed, built, live time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.latency.observe(live.Sub(observed))
	m.stages[0].observe(built.Sub(observed))
	m.stages[1].observe(live.Sub(built))
}

// setPins records whether every pin is in place.
func (m *Metrics) setPins(ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pinsLost = !ok
}

// setRefused records how many of a source's services the tree refuses.
func (m *Metrics) setRefused(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refused = n
}

// setWarnings records how many warnings the installed tree has.
func (m *Metrics) setWarnings(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.warnings = n
}

// failed records a topology that could not be built or installed.
func (m *Metrics) failed() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.errors++
}

// ServeHTTP writes the metrics in the Prometheus text format (0.0.4).
func (m *Metrics) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	m.WriteTo(w)
}

// WriteTo writes the metrics in the Prometheus text format.
func (m *Metrics) WriteTo(w io.Writer) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pw := promtext.New(w)
	pw.Metric("loctree_installs_total", "counter", "Trees installed into the BPF maps.", float64(m.installs))
	pw.Metric("loctree_install_errors_total", "counter", "Topologies rejected (parse, build or install errors); the installed tree was kept.", float64(m.errors))
	pw.Metric("loctree_services_rewritten_total", "counter", "Services written into the maps because they were new or changed.", float64(m.rewritten))
	pw.Metric("loctree_services", "gauge", "Services with a VIP installed.", float64(m.services))
	pw.Metric("loctree_endpoints", "gauge", "Eligible endpoints installed.", float64(m.endpoints))
	pw.Metric("loctree_generation", "gauge", "Generation of the installed tree.", float64(m.gen))
	pw.Metric("loctree_services_refused", "gauge", "Services of the source the tree refuses (the agent's log says why); each keeps its last installed version while the others are applied.", float64(m.refused))
	pw.Metric("loctree_kernel_services_refused", "gauge", "Services of the installed tree with a VIP that the kernel does not install because they use a setting its programs do not implement yet (none today); the filters are served them, connections to their VIPs are not redirected (the agent's log says why, once).", float64(m.kernelRefused))
	pw.Metric("loctree_topology_warnings", "gauge", "Warnings of the installed tree: input accepted that most likely does not do what was meant (a failover region no endpoint or node has; the agent's log names each once, with the nearest known region).", float64(m.warnings))
	pw.Metric("loctree_pins_ok", "gauge", "1 while every map and link the agent pinned is in its bpffs directory; 0 when pins are gone and cannot be restored (the kernel path then stops when the agent exits).", float64(boolToInt(!m.pinsLost)))
	unlabelled := []string{""}
	writeHistogram(pw, "loctree_install_duration_seconds", "Time to install one tree into the maps.", unlabelled, &m.install)
	writeHistogram(pw, "loctree_update_latency_seconds", "Time from a change the source saw (a Kubernetes informer event's arrival; the poll that found a topology file changed) to the tree holding it being live in the kernel and served to the filters.", unlabelled, &m.latency)
	writeHistogram(pw, "loctree_update_stage_seconds", "The update latency by stage: build (change seen to tree built, including the Kubernetes source's debounce), kernel (tree built to live in the kernel and served).",
		[]string{`stage="build"`, `stage="kernel"`}, &m.stages[0], &m.stages[1])
	m.fetches.write(pw)
	if m.source != nil {
		pw.Metric("loctree_source_up", "gauge", "1 while the source reaches where its state comes from (the Kubernetes API server); 0 while it does not and the agent serves its last tree (/healthz says why).", float64(boolToInt(m.source() == nil)))
	}
	if m.extra != nil {
		m.extra(pw) // an error stays in pw
	}
	if m.kernel != nil {
		if st, err := m.kernel(); err == nil {
			pw.Metric("loctree_kernel_redirects_total", "counter", "Connections and datagrams redirected from a VIP to an endpoint.", float64(st[bpf.StatRedirect]))
			pw.Labeled("loctree_kernel_refused_total", "counter", "Connections and datagrams to a VIP refused, by reason: no_candidate (strict mode, beyond failover_limit, or no eligible endpoint), bad_index (a walk left its service's regions), bad_family (an endpoint of another address family), scratch_busy (a priority-load computation found every scratch slot of its CPU in use by preempted connects).",
				"reason", refusals(st))
			pw.Metric("loctree_kernel_sockets_full_total", "counter", "Sockets redirected but not remembered because the socket table was full (--max-sockets): no getpeername rewrite.", float64(st[bpf.StatSockFull]))
		}
	}
	if m.picks != nil {
		if picks, err := m.picks(); err == nil {
			writePriorityPicks(pw, picks)
		}
	}
	if m.readTraffic() {
		m.tally.write(pw)
	}
	return pw.Written()
}

// readTraffic adds the kernel's new traffic counts to the tally, placed
// with the tree installed now; it reports whether it could read them.
func (m *Metrics) readTraffic() bool {
	if m.traffic == nil || m.tree == nil {
		return false // before the first tree: counts an earlier agent left wait for it
	}
	counts, other, err := m.traffic()
	if err != nil {
		return false
	}
	if stale := m.tally.update(m.tree, counts, other); len(stale) > 0 && m.forgetTraffic != nil {
		n, _ := m.forgetTraffic(stale)
		m.tally.forget(stale[:n])
	}
	return true
}

// refusals are the kernel's refusal counters by reason label.
func refusals(st [bpf.StatCount]uint64) []labeledValue {
	return []labeledValue{
		{Label: "no_candidate", V: float64(st[bpf.StatNoCandidate])},
		{Label: "bad_index", V: float64(st[bpf.StatBadIndex])},
		{Label: "bad_family", V: float64(st[bpf.StatBadFamily])},
		{Label: "scratch_busy", V: float64(st[bpf.StatScratchBusy])},
	}
}

// promWriter writes the agent's metrics (internal/promtext).
type promWriter = promtext.Writer

// labeledValue is one sample of a one-label metric.
type labeledValue = promtext.Labeled

// writePriorityPicks writes the kernel's picks by priority: picks[2·p] from
// priority p's healthy endpoints, picks[2·p+1] from its degraded ones.
func writePriorityPicks(p *promWriter, picks []uint64) {
	const name = "loctree_kernel_priority_picks_total"
	p.Head(name, "counter", "New backends the kernel chose by Envoy's priority load (services with spillover or distribute), by priority (0: the source's deepest match) and availability: healthy (in panic: any) or degraded endpoints. A socket that keeps its backend is not counted again.")
	for i, v := range picks {
		p.Printf("%s{priority=\"%d\",availability=%q} %d\n", name, i/2, [2]string{"healthy", "degraded"}[i%2], v)
	}
}

// writeHistogram writes a histogram with one series per labels entry ("" for
// an unlabelled histogram; else `key="value"`), each in h's order.
func writeHistogram(p *promWriter, name, help string, labels []string, h ...*histogram) {
	p.Head(name, "histogram", help)
	for i, x := range h {
		sel, le := "", ""
		if labels[i] != "" {
			sel, le = "{"+labels[i]+"}", labels[i]+","
		}
		for j, bound := range x.bounds {
			p.Printf("%s_bucket{%sle=\"%g\"} %d\n", name, le, bound, x.counts[j])
		}
		p.Printf("%s_bucket{%sle=\"+Inf\"} %d\n", name, le, x.count)
		p.Printf("%s_sum%s %s\n%s_count%s %d\n", name, sel, strconv.FormatFloat(x.sum, 'f', -1, 64), name, sel, x.count)
	}
}

// histogram counts durations in cumulative buckets, as Prometheus does (a
// value counts in every bucket whose upper bound is at least the value).
type histogram struct {
	bounds []float64 // seconds
	counts []uint64  // cumulative, per bound
	count  uint64
	sum    float64
}

func newHistogram(bounds []float64) histogram {
	return histogram{bounds: bounds, counts: make([]uint64, len(bounds))}
}

func (h *histogram) observe(d time.Duration) {
	s := d.Seconds()
	h.count++
	h.sum += s
	for i, le := range h.bounds {
		if s <= le {
			h.counts[i]++
		}
	}
}

func boolToInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
