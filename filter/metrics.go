package main

import (
	"strconv"

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
}

type counters struct {
	picks                             [shared.MaxLevels + 1]abi.Counter
	priorities                        [shared.MaxPriorities]abi.Counter
	noCandidate, unknown, passthrough abi.Counter
}

// flush adds the counts since the last flush to the host's counters.
func (m *metrics) flush() {
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
	}
	for d := range m.picks {
		m.counters.picks[d] = abi.DefineCounterMetric("loctree_picks_depth_" + strconv.Itoa(d) + "_total")
	}
	for p := range m.priorities {
		m.counters.priorities[p] = abi.DefineCounterMetric(priorityMetric(p))
	}
	return m
}

// priorityMetric is the counter of picks in priority p of a spillover
// service (Envoy's priority load; docs/FORMAT.md, "Priority load").
func priorityMetric(p int) string { return "loctree_picks_priority_" + strconv.Itoa(p) + "_total" }
