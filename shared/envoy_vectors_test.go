package shared

import (
	"fmt"
	"slices"
	"testing"
)

// envoyVector is one expectation of Envoy's own tests,
// test/extensions/load_balancing_policies/common/load_balancer_impl_test.cc
// (envoyproxy/envoy), LoadBalancerBaseTest: the host sets as
// updateHostSet(num_hosts, num_healthy_hosts, num_degraded_hosts) and the
// asserted getLoadPercentage, getDegradedLoadPercentage and getPanic (nil:
// not asserted there). Cases with excluded hosts or weighted priority health
// are left out: loctree has neither.
type envoyVector struct {
	test          string
	sets          []envoyHostSet // {hosts, healthy, degraded}
	of, threshold uint32
	healthy       []uint32
	degraded      []uint32
	panic         []bool
}

var envoyVectors = []envoyVector{
	{"PrioritySelection", []envoyHostSet{{1, 0, 0}, {1, 0, 0}}, 140, 50, []uint32{50, 50}, nil, nil},
	{"PrioritySelection", []envoyHostSet{{1, 0, 0}, {2, 0, 0}}, 140, 50, []uint32{34, 66}, nil, nil},
	{"PrioritySelection", []envoyHostSet{{1, 0, 0}, {2, 0, 0}, {1, 1, 0}}, 140, 50, []uint32{0, 0, 100}, nil, nil},
	{"PrioritySelection", []envoyHostSet{{1, 1, 0}, {2, 0, 0}, {1, 1, 0}}, 140, 50, []uint32{100, 0, 0}, nil, nil},
	{"OverProvisioningFactor", []envoyHostSet{{4, 2, 0}, {4, 2, 0}}, 140, 50, []uint32{70, 30}, nil, nil},
	{"OverProvisioningFactor", []envoyHostSet{{4, 2, 0}, {4, 2, 0}}, 100, 50, []uint32{50, 50}, nil, nil},
	{"GentleFailover", []envoyHostSet{{1, 1, 0}, {1, 1, 0}}, 140, 50, []uint32{100, 0}, nil, []bool{false, false}},
	{"GentleFailover", []envoyHostSet{{2, 1, 0}, {2, 1, 0}}, 140, 50, []uint32{70, 30}, nil, []bool{false, false}},
	{"GentleFailover", []envoyHostSet{{4, 1, 0}, {2, 2, 0}}, 140, 50, []uint32{35, 65}, nil, []bool{false, false}},
	{"GentleFailover", []envoyHostSet{{4, 1, 0}, {4, 1, 0}}, 140, 50, []uint32{50, 50}, nil, []bool{true, true}},
	{"GentleFailoverWithExtraLevels", []envoyHostSet{{1, 1, 0}, {1, 1, 0}, {1, 1, 0}}, 140, 50, []uint32{100, 0, 0}, nil, []bool{false, false, false}},
	{"GentleFailoverWithExtraLevels", []envoyHostSet{{2, 1, 0}, {2, 1, 0}, {2, 1, 0}}, 140, 50, []uint32{70, 30, 0}, []uint32{0, 0, 0}, nil},
	{"GentleFailoverWithExtraLevels", []envoyHostSet{{4, 1, 0}, {2, 2, 0}, {2, 1, 0}}, 140, 50, []uint32{35, 65, 0}, []uint32{0, 0, 0}, nil},
	{"GentleFailoverWithExtraLevels", []envoyHostSet{{4, 1, 0}, {4, 1, 0}, {4, 1, 0}}, 140, 50, []uint32{35, 35, 30}, []uint32{0, 0, 0}, nil},
	{"GentleFailoverWithExtraLevels", []envoyHostSet{{5, 1, 0}, {5, 1, 0}, {5, 1, 0}}, 140, 50, []uint32{34, 33, 33}, []uint32{0, 0, 0}, []bool{true, true, true}},
	{"GentleFailoverWithExtraLevels", []envoyHostSet{{5, 0, 0}, {5, 0, 0}, {5, 5, 0}}, 140, 50, []uint32{0, 0, 100}, []uint32{0, 0, 0}, []bool{false, false, false}},
	{"GentleFailoverWithExtraLevels", []envoyHostSet{{5, 0, 0}, {5, 0, 0}, {5, 4, 0}}, 140, 50, []uint32{0, 0, 100}, []uint32{0, 0, 0}, []bool{false, false, false}},
	{"GentleFailoverWithExtraLevels", []envoyHostSet{{5, 0, 0}, {5, 0, 0}, {5, 2, 0}}, 140, 50, []uint32{34, 33, 33}, []uint32{0, 0, 0}, []bool{true, true, true}},
	{"GentleFailoverWithExtraLevels", []envoyHostSet{{5, 0, 5}, {5, 2, 2}, {5, 2, 0}}, 140, 50, []uint32{0, 56, 44}, []uint32{0, 0, 0}, []bool{false, false, false}},
	{"GentleFailoverWithExtraLevels", []envoyHostSet{{5, 0, 0}, {3, 0, 0}, {2, 0, 0}}, 140, 50, []uint32{50, 30, 20}, []uint32{0, 0, 0}, []bool{true, true, true}},
	{"GentleFailoverWithExtraLevels", []envoyHostSet{{5, 0, 0}, {6, 2, 0}, {3, 1, 0}}, 140, 50, []uint32{37, 42, 21}, []uint32{0, 0, 0}, []bool{true, true, true}},
	{"GentleFailoverWithExtraLevels", []envoyHostSet{{5, 0, 1}, {5, 0, 5}, {5, 1, 0}}, 140, 50, []uint32{0, 0, 28}, []uint32{28, 44, 0}, nil},
	{"GentleFailoverWithExtraLevels", []envoyHostSet{{5, 0, 0}, {5, 0, 2}, {5, 0, 1}}, 140, 0, []uint32{0, 0, 0}, []uint32{0, 67, 33}, nil},
	{"GentleFailoverWithExtraLevels", []envoyHostSet{{5, 0, 0}, {5, 0, 2}, {5, 0, 1}}, 140, 50, []uint32{34, 33, 33}, []uint32{0, 0, 0}, nil},
	{"GentleFailoverWithExtraLevels", []envoyHostSet{{3, 0, 0}, {3, 0, 0}, {3, 0, 0}}, 140, 50, []uint32{34, 33, 33}, nil, []bool{true, true, true}},
	{"GentleFailoverWithExtraLevels", []envoyHostSet{{0, 0, 0}, {6, 0, 0}, {3, 0, 0}}, 140, 50, []uint32{0, 67, 33}, nil, []bool{true, true, true}},
}

// TestEnvoyVectors holds both the oracle (transcription) and shared's
// integer computation to Envoy's own expectations.
func TestEnvoyVectors(t *testing.T) {
	for i, v := range envoyVectors {
		h, d, p := envoyLoads(v.sets, v.of, v.threshold)
		if err := checkVector(v, h, d, p); err != "" {
			t.Errorf("vector %d (%s): oracle %s", i, v.test, err)
		}
		var l Loads
		l.N = len(v.sets)
		for k, s := range v.sets {
			l.Counts[k] = PriorityCounts{Healthy: uint32(s.healthy), Degraded: uint32(s.degraded), Total: uint32(s.hosts)}
		}
		l.distribute(v.of, v.threshold)
		h, d, p = make([]uint32, l.N), make([]uint32, l.N), make([]bool, l.N)
		for k := range l.N {
			h[k], d[k], p[k] = uint32(l.Healthy[k]), uint32(l.Degraded[k]), l.InPanic(k)
		}
		if err := checkVector(v, h, d, p); err != "" {
			t.Errorf("vector %d (%s): shared %s", i, v.test, err)
		}
	}
}

func checkVector(v envoyVector, h, d []uint32, p []bool) string {
	switch {
	case !slices.Equal(h, v.healthy):
		return fmt.Sprintf("healthy load %v, Envoy's test asserts %v", h, v.healthy)
	case v.degraded != nil && !slices.Equal(d, v.degraded):
		return fmt.Sprintf("degraded load %v, Envoy's test asserts %v", d, v.degraded)
	case v.panic != nil && !slices.Equal(p, v.panic):
		return "panic differs from Envoy's test"
	}
	return ""
}
