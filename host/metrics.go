package host

import (
	"slices"
	"strings"
	"sync"
)

// Metrics is the host-wide metric registry behind proxy_define_metric and
// friends. Defining the same name and type twice (from any VM) returns the
// same metric, as Envoy's stats scope does.
type Metrics struct {
	mu     sync.Mutex
	byName map[string]uint32
	list   []*metric
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
	Name  string
	Type  MetricType
	Value uint64 // counter or gauge value; for a histogram the last value
	Count uint64 // histogram: number of recorded values
	Sum   uint64 // histogram: sum of recorded values
}

func newMetrics() *Metrics { return &Metrics{byName: map[string]uint32{}} }

func (m *Metrics) define(t MetricType, name string) (uint32, Status) {
	if t > MetricHistogram {
		return 0, StatusBadArgument
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key := t.String() + "/" + name
	if id, ok := m.byName[key]; ok {
		return id, StatusOK
	}
	m.list = append(m.list, &metric{name: name, typ: t})
	id := uint32(len(m.list)) // ids start at 1
	m.byName[key] = id
	return id, StatusOK
}

func (m *Metrics) get(id uint32) *metric {
	if id == 0 || int(id) > len(m.list) {
		return nil
	}
	return m.list[id-1]
}

func (m *Metrics) increment(id uint32, delta int64) Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	x := m.get(id)
	switch {
	case x == nil:
		return StatusNotFound
	case x.typ == MetricHistogram, x.typ == MetricCounter && delta < 0:
		return StatusBadArgument
	}
	x.value = uint64(int64(x.value) + delta)
	return StatusOK
}

func (m *Metrics) record(id uint32, v uint64) Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	x := m.get(id)
	if x == nil {
		return StatusNotFound
	}
	x.value = v
	if x.typ == MetricHistogram {
		x.count++
		x.sum += v
	}
	return StatusOK
}

func (m *Metrics) value(id uint32) (uint64, Status) {
	m.mu.Lock()
	defer m.mu.Unlock()
	x := m.get(id)
	if x == nil {
		return 0, StatusNotFound
	}
	return x.value, StatusOK
}

// Snapshot returns every metric, sorted by name.
func (m *Metrics) Snapshot() []Metric {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Metric, 0, len(m.list))
	for _, x := range m.list {
		out = append(out, Metric{Name: x.name, Type: x.typ, Value: x.value, Count: x.count, Sum: x.sum})
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
