package loader

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/loctree/loctree/bpf"
)

// installBuckets are the upper bounds (seconds) of the install latency
// histogram.
var installBuckets = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5}

// Metrics are the agent's counters, served in the Prometheus text format.
type Metrics struct {
	mu        sync.Mutex
	installs  uint64
	errors    uint64
	rewritten uint64
	buckets   []uint64 // cumulative counts per installBuckets
	sum       float64
	services  int
	endpoints int
	gen       uint64
	pinsLost  bool
	kernel    func() ([bpf.StatCount]uint64, error)
	fetches   treeFetches // the filters' /v1/tree polls (treefetches.go)
}

func newMetrics() *Metrics {
	return &Metrics{buckets: make([]uint64, len(installBuckets))}
}

// installed records a successful Apply.
func (m *Metrics) installed(r Result) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.installs++
	m.rewritten += uint64(r.Rewritten)
	m.services, m.endpoints, m.gen = r.Services, r.Endpoints, r.Generation
	s := r.Duration.Seconds()
	m.sum += s
	for i, le := range installBuckets {
		if s <= le {
			m.buckets[i]++
		}
	}
}

// setPins records whether every pin is in place.
func (m *Metrics) setPins(ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pinsLost = !ok
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
	pw := &promWriter{w: w}
	pw.metric("loctree_installs_total", "counter", "Trees installed into the BPF maps.", float64(m.installs))
	pw.metric("loctree_install_errors_total", "counter", "Topologies rejected (parse, build or install errors); the installed tree was kept.", float64(m.errors))
	pw.metric("loctree_services_rewritten_total", "counter", "Services written into the maps because they were new or changed.", float64(m.rewritten))
	pw.metric("loctree_services", "gauge", "Services with a VIP installed.", float64(m.services))
	pw.metric("loctree_endpoints", "gauge", "Eligible endpoints installed.", float64(m.endpoints))
	pw.metric("loctree_generation", "gauge", "Generation of the installed tree.", float64(m.gen))
	pw.metric("loctree_pins_ok", "gauge", "1 while every map and link the agent pinned is in its bpffs directory; 0 when pins are gone and cannot be restored (the kernel path then stops when the agent exits).", float64(boolToInt(!m.pinsLost)))
	pw.histogram("loctree_install_duration_seconds", "Time to install one tree into the maps.", m.buckets, m.sum, m.installs)
	m.fetches.write(pw)
	if m.kernel != nil {
		if st, err := m.kernel(); err == nil {
			pw.metric("loctree_kernel_redirects_total", "counter", "Connections and datagrams redirected from a VIP to an endpoint.", float64(st[bpf.StatRedirect]))
			pw.labeled("loctree_kernel_refused_total", "counter", "Connections and datagrams to a VIP refused, by reason: no_candidate (strict mode, beyond failover_limit, or no eligible endpoint), bad_index (a walk left its service's regions), bad_family (an endpoint of another address family), scratch_busy (a priority-load computation found every scratch slot of its CPU in use by preempted connects).",
				"reason", refusals(st))
			pw.metric("loctree_kernel_sockets_full_total", "counter", "Sockets redirected but not remembered because the socket table was full (--max-sockets): no getpeername rewrite.", float64(st[bpf.StatSockFull]))
		}
	}
	return pw.n, pw.err
}

// refusals are the kernel's refusal counters by reason label.
func refusals(st [bpf.StatCount]uint64) []labeledValue {
	return []labeledValue{
		{"no_candidate", float64(st[bpf.StatNoCandidate])},
		{"bad_index", float64(st[bpf.StatBadIndex])},
		{"bad_family", float64(st[bpf.StatBadFamily])},
		{"scratch_busy", float64(st[bpf.StatScratchBusy])},
	}
}

type labeledValue struct {
	label string
	v     float64
}

type promWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (p *promWriter) printf(format string, args ...any) {
	if p.err != nil {
		return
	}
	n, err := fmt.Fprintf(p.w, format, args...)
	p.n += int64(n)
	p.err = err
}

func (p *promWriter) metric(name, typ, help string, v float64) {
	p.printf("# HELP %s %s\n# TYPE %s %s\n%s %s\n", name, help, name, typ, name, strconv.FormatFloat(v, 'f', -1, 64))
}

func (p *promWriter) labeled(name, typ, help, key string, vs []labeledValue) {
	p.printf("# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	for _, v := range vs {
		p.printf("%s{%s=%q} %s\n", name, key, v.label, strconv.FormatFloat(v.v, 'f', -1, 64))
	}
}

func (p *promWriter) histogram(name, help string, buckets []uint64, sum float64, count uint64) {
	p.printf("# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
	for i, le := range installBuckets {
		p.printf("%s_bucket{le=\"%g\"} %d\n", name, le, buckets[i])
	}
	p.printf("%s_bucket{le=\"+Inf\"} %d\n%s_sum %s\n%s_count %d\n", name, count, name, strconv.FormatFloat(sum, 'f', -1, 64), name, count)
}

func boolToInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
