package main

import (
	"strconv"

	"github.com/loctree/loctree/filter/internal/abi"
	"github.com/loctree/loctree/shared"
)

// metrics are the filter's counters and gauges (names as Envoy stats).
type metrics struct {
	picks         [shared.MaxLevels + 1]abi.Counter // by matched depth
	noCandidate   abi.Counter
	unknown       abi.Counter
	passthrough   abi.Counter
	fetchFailures abi.Counter
	generation    abi.Gauge
}

func defineMetrics() *metrics {
	m := &metrics{
		noCandidate:   abi.DefineCounterMetric("loctree_no_candidate_total"),
		unknown:       abi.DefineCounterMetric("loctree_unknown_service_total"),
		passthrough:   abi.DefineCounterMetric("loctree_no_tree_total"),
		fetchFailures: abi.DefineCounterMetric("loctree_fetch_failures_total"),
		generation:    abi.DefineGaugeMetric("loctree_tree_generation"),
	}
	for d := range m.picks {
		m.picks[d] = abi.DefineCounterMetric("loctree_picks_depth_" + strconv.Itoa(d) + "_total")
	}
	return m
}
