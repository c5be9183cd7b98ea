package host

import (
	"slices"
	"strings"
	"sync"
)

// Metrics is the host-wide metric registry behind proxy_define_metric and
// friends. Defining a name and type again (from any VM) names the same
// metric, as Envoy's stats scope does, under a new id. Ids carry the
// metric type in their low two bits and step by 4 per type, as cpp-host
// numbers them (include/proxy-wasm/wasm.h:158-171).
type Metrics struct {
	mu     sync.Mutex
	byName map[string]*metric
	byID   map[uint32]*metric
	next   [3]uint32 // last id given per type
	list   []*metric
	tags   []StatTag
}

type metric struct {
	name  string
	typ   MetricType
	value uint64 // counter/gauge value; histogram: last recorded value
	count uint64 // histogram: number of records
	sum   uint64 // histogram: sum of records
}

// Metric is a snapshot of one metric.
type Metric struct {
	Name string // as defined
	// Prometheus is the name Envoy's Prometheus output gives it (with the
	// host's StatTags taken out as Tags); "" when Envoy exports none.
	Prometheus string
	Tags       []Tag
	Type       MetricType
	Value      uint64 // counter or gauge value; for a histogram the last value
	Count      uint64 // histogram: number of recorded values
	Sum        uint64 // histogram: sum of recorded values
}

const metricIDStep = 4 // kMetricIdIncrement; the type is id & 3

func newMetrics(tags []StatTag) *Metrics {
	m := &Metrics{byName: map[string]*metric{}, byID: map[uint32]*metric{}, tags: tags}
	for t := range m.next {
		m.next[t] = uint32(t)
	}
	return m
}

func (m *Metrics) define(t MetricType, name string) (uint32, Status) {
	if t > MetricHistogram {
		return 0, StatusBadArgument
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key := t.String() + "/" + name
	x, ok := m.byName[key]
	if !ok {
		x = &metric{name: name, typ: t}
		m.byName[key] = x
		m.list = append(m.list, x)
	}
	m.next[t] += metricIDStep
	m.byID[m.next[t]] = x
	return m.next[t], StatusOK
}

// lookup finds id; a type the ABI does not know is BadArgument, an unknown
// id of a known type NotFound (Envoy Context::incrementMetric and friends).
func (m *Metrics) lookup(id uint32) (*metric, Status) {
	if MetricType(id&3) > MetricHistogram {
		return nil, StatusBadArgument
	}
	if x := m.byID[id]; x != nil {
		return x, StatusOK
	}
	return nil, StatusNotFound
}

// increment adds delta: a counter only a positive one (0 and negatives are
// BadArgument), a gauge any; a histogram is BadArgument (Envoy
// source/extensions/common/wasm/context.cc, Context::incrementMetric).
func (m *Metrics) increment(id uint32, delta int64) Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	x, st := m.lookup(id)
	switch {
	case st != StatusOK:
		return st
	case x.typ == MetricHistogram, x.typ == MetricCounter && delta <= 0:
		return StatusBadArgument
	}
	x.value = uint64(int64(x.value) + delta)
	return StatusOK
}

// record adds v to a counter, sets a gauge and records a histogram value
// (Envoy Context::recordMetric).
func (m *Metrics) record(id uint32, v uint64) Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	x, st := m.lookup(id)
	if st != StatusOK {
		return st
	}
	switch x.typ {
	case MetricCounter:
		x.value += v
	case MetricGauge:
		x.value = v
	default:
		x.value = v
		x.count++
		x.sum += v
	}
	return StatusOK
}

// value reads a counter or gauge; a histogram is BadArgument (Envoy
// Context::getMetric).
func (m *Metrics) value(id uint32) (uint64, Status) {
	m.mu.Lock()
	defer m.mu.Unlock()
	x, st := m.lookup(id)
	if st != StatusOK {
		return 0, st
	}
	if x.typ == MetricHistogram {
		return 0, StatusBadArgument
	}
	return x.value, StatusOK
}

// Snapshot returns every metric, sorted by name.
func (m *Metrics) Snapshot() []Metric {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Metric, 0, len(m.list))
	for _, x := range m.list {
		prom, tags := envoyName(x.name, m.tags)
		out = append(out, Metric{Name: x.name, Prometheus: prom, Tags: tags, Type: x.typ, Value: x.value, Count: x.count, Sum: x.sum})
	}
	slices.SortFunc(out, func(a, b Metric) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Value returns the value of the named metric (counter, gauge, or a
// histogram's last value) and whether it exists.
func (m *Metrics) Value(name string) (uint64, bool) {
	for _, x := range m.Snapshot() {
		if x.Name == name {
			return x.Value, true
		}
	}
	return 0, false
}

// The metric hostcalls (cpp-host src/exports.cc:536-580).

func hcDefineMetric(vm *VM, st []uint64) Status {
	name, ok := vm.readString(st[1], st[2])
	if !ok {
		return StatusInvalidMemoryAccess
	}
	id, status := vm.h.metrics.define(MetricType(st[0]), name)
	if status == StatusOK && !vm.writeU32(st[3], id) {
		return StatusInvalidMemoryAccess
	}
	return status
}

func hcIncrementMetric(vm *VM, st []uint64) Status {
	return vm.h.metrics.increment(uint32(st[0]), int64(st[1]))
}

func hcRecordMetric(vm *VM, st []uint64) Status {
	return vm.h.metrics.record(uint32(st[0]), st[1])
}

func hcGetMetric(vm *VM, st []uint64) Status {
	v, status := vm.h.metrics.value(uint32(st[0]))
	if status == StatusOK && !vm.writeU64(st[1], v) {
		return StatusInvalidMemoryAccess
	}
	return status
}
