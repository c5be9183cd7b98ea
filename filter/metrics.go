package main

import (
	"strconv"
	"strings"

	"github.com/loctree/loctree/filter/internal/abi"
	"github.com/loctree/loctree/shared"
)

// metrics are the filter's counters and gauges (names as Envoy stats).
// Per-request counts are kept in the VM and flushed to the host on every
// tick (a hostcall per request costs more than the pick itself).
type metrics struct {
	picks                             [shared.MaxLevels + 1]uint64 // by matched depth
	priorities                        [shared.MaxPriorities]uint64 // picks by priority (spillover services)
	noCandidate, unknown, passthrough uint64
	counters                          counters
	fetchFailures                     abi.Counter
	generation                        abi.Gauge
	services                          map[string]*serviceCounts // by service name
	other                             *serviceCounts            // services past the cap
	traffic                           *traffic                  // by source and destination value (traffic.go)
}

type counters struct {
	picks                             [shared.MaxLevels + 1]abi.Counter
	priorities                        [shared.MaxPriorities]abi.Counter
	noCandidate, unknown, passthrough abi.Counter
}

// flush adds the counts since the last flush to the host's counters.
func (m *metrics) flush() {
	for _, s := range m.services {
		s.flush()
	}
	m.other.flush()
	m.traffic.flush()
	for d, n := range m.picks {
		if n > 0 {
			m.counters.picks[d].Increment(n)
			m.picks[d] = 0
		}
	}
	for p, n := range m.priorities {
		if n > 0 {
			m.counters.priorities[p].Increment(n)
			m.priorities[p] = 0
		}
	}
	for _, c := range []struct {
		n *uint64
		c abi.Counter
	}{{&m.noCandidate, m.counters.noCandidate}, {&m.unknown, m.counters.unknown}, {&m.passthrough, m.counters.passthrough}} {
		if *c.n > 0 {
			c.c.Increment(*c.n)
			*c.n = 0
		}
	}
}

func defineMetrics() *metrics {
	m := &metrics{
		counters: counters{
			noCandidate: abi.DefineCounterMetric("loctree_no_candidate_total"),
			unknown:     abi.DefineCounterMetric("loctree_unknown_service_total"),
			passthrough: abi.DefineCounterMetric("loctree_no_tree_total"),
		},
		fetchFailures: abi.DefineCounterMetric("loctree_fetch_failures_total"),
		generation:    abi.DefineGaugeMetric("loctree_tree_generation"),
		services:      map[string]*serviceCounts{},
		other:         newServiceCounts(otherServices),
	}
	for d := range m.picks {
		m.counters.picks[d] = abi.DefineCounterMetric("loctree_picks_depth_" + strconv.Itoa(d) + "_total")
	}
	for p := range m.priorities {
		m.counters.priorities[p] = abi.DefineCounterMetric(priorityMetric(p))
	}
	return m
}

// Per-service counters. Envoy names a Wasm plugin's metric by the name it
// defines (prefixed with the wasmcustom namespace, which its Prometheus
// output strips), and takes tags out of names with the stats_tags regexes
// of its bootstrap; Istio generates `(<tag>=\.=(.*?);\.;)` for each of a
// proxy's extraStatTags (istio/istio tools/packaging/common/
// envoy_bootstrap.json:121-126). With extraStatTags loctree_service and
// loctree_level (istio/mesh/istiod-values.yaml), Prometheus sees
// loctree_service_picks_total{loctree_service, loctree_level} and
// loctree_service_no_candidate_total{loctree_service}.
const (
	// maxServiceMetrics bounds the services a VM gives their own counters:
	// at most 32 × (MaxLevels+2) metrics per VM, whatever the tree holds.
	// Services are taken in the order of their first request; later ones
	// (and names the tag form cannot carry) count under otherServices.
	maxServiceMetrics = 32
	otherServices     = "(other)"
)

// serviceCounts are one service's per-request counts and, once defined
// (on the first flush with a count), its counters.
type serviceCounts struct {
	picks        [shared.MaxLevels + 1]uint64 // by matched level
	noCandidate  uint64
	pickMetric   [shared.MaxLevels + 1]lazyCounter
	noCandMetric lazyCounter
}

// service returns the counts of the named service.
func (m *metrics) service(name string) *serviceCounts {
	if s, ok := m.services[name]; ok {
		return s
	}
	if len(m.services) >= maxServiceMetrics || !taggable(name) {
		return m.other
	}
	s := newServiceCounts(name)
	m.services[name] = s
	return s
}

func newServiceCounts(label string) *serviceCounts {
	s := &serviceCounts{}
	for level := range s.pickMetric {
		s.pickMetric[level].name = statTag("loctree_service", label) + statTag("loctree_level", strconv.Itoa(level)) + "loctree_service_picks_total"
	}
	s.noCandMetric.name = statTag("loctree_service", label) + "loctree_service_no_candidate_total"
	return s
}

func (s *serviceCounts) flush() {
	for level, n := range s.picks {
		s.pickMetric[level].add(n)
		s.picks[level] = 0
	}
	s.noCandMetric.add(s.noCandidate)
	s.noCandidate = 0
}

// statTag is a tag in the form Istio's extraStatTags regex extracts.
func statTag(name, value string) string { return name + "=.=" + value + ";.;" }

// taggable says a service name can be a tag value: it holds neither
// delimiter, and is not the label of the services past the cap.
func taggable(name string) bool {
	return name != otherServices && !strings.Contains(name, "=.=") && !strings.Contains(name, ";.;")
}

// lazyCounter is a counter defined when it first has something to add.
type lazyCounter struct {
	name    string
	counter abi.Counter
	defined bool
}

func (c *lazyCounter) add(n uint64) {
	if n == 0 {
		return
	}
	if !c.defined {
		c.counter, c.defined = abi.DefineCounterMetric(c.name), true
	}
	c.counter.Increment(n)
}

// priorityMetric is the counter of picks in priority p of a spillover
// service (Envoy's priority load; docs/FORMAT.md, "Priority load").
func priorityMetric(p int) string { return "loctree_picks_priority_" + strconv.Itoa(p) + "_total" }
