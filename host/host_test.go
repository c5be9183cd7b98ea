package host

import (
	"bytes"
	"reflect"
	"testing"
)

func TestEncodePairsSpecExample(t *testing.T) {
	// The spec's example: {{"a": "1"}, {"b": "22"}}.
	want := []byte{
		2, 0, 0, 0,
		1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0,
		'a', 0, '1', 0, 'b', 0, '2', '2', 0,
	}
	h := Headers{{"a", "1"}, {"b", "22"}}
	got := EncodePairs(h)
	if !bytes.Equal(got, want) {
		t.Fatalf("EncodePairs = %v, want %v", got, want)
	}
	back, err := DecodePairs(got)
	if err != nil || !reflect.DeepEqual(back, h) {
		t.Fatalf("DecodePairs = %v, %v", back, err)
	}
	for _, empty := range [][]byte{nil, {0}} {
		if h, err := DecodePairs(empty); err != nil || len(h) != 0 {
			t.Fatalf("DecodePairs(%v) = %v, %v", empty, h, err)
		}
	}
}

func TestDecodePairsRejects(t *testing.T) {
	for name, b := range map[string][]byte{
		"short":          {1, 0},
		"count too big":  {9, 0, 0, 0, 1, 0, 0, 0},
		"size too big":   {1, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 'a', 0, 0},
		"missing NUL":    {1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 'a', 'b', 0},
		"huge key count": {0xff, 0xff, 0xff, 0xff},
	} {
		if _, err := DecodePairs(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzDecodePairs(f *testing.F) {
	f.Add(EncodePairs(Headers{{"a", "1"}, {":path", "/x"}}))
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodePairs(b)
		if err != nil {
			return
		}
		again, err := DecodePairs(EncodePairs(h))
		if err != nil || len(again) != len(h) {
			t.Fatalf("round trip of %v: %v %v", h, again, err)
		}
	})
}

func TestHeadersSetKeepsFirstPosition(t *testing.T) {
	h := Headers{{"a", "1"}, {"x", "1"}, {"b", "2"}, {"x", "2"}}
	h.Set("X", "new")
	if want := (Headers{{"a", "1"}, {"x", "new"}, {"b", "2"}}); !reflect.DeepEqual(h, want) {
		t.Fatalf("Set = %v, want %v", h, want)
	}
	h.Del("a")
	h.Add("C", "3")
	if want := (Headers{{"x", "new"}, {"b", "2"}, {"c", "3"}}); !reflect.DeepEqual(h, want) {
		t.Fatalf("Del/Add = %v, want %v", h, want)
	}
}

// TestSharedDataCAS follows cpp-host src/shared_data.cc:75-95: a CAS
// is checked against an existing key only; an absent key is created.
func TestSharedDataCAS(t *testing.T) {
	s := newSharedData()
	if st := s.Set("k", []byte("v1"), 7); st != StatusOK {
		t.Fatalf("CAS on a missing key: %v, want OK (created)", st)
	}
	_, cas, _ := s.Get("k")
	if st := s.Set("k", []byte("v2"), cas); st != StatusOK {
		t.Fatalf("CAS with the current token: %v", st)
	}
	if st := s.Set("k", []byte("v3"), cas); st != StatusCASMismatch {
		t.Fatalf("CAS with a stale token: %v", st)
	}
	if v, _, _ := s.Get("k"); string(v) != "v2" {
		t.Fatalf("value %q, want v2", v)
	}
}

// TestMetrics follows cpp-host include/proxy-wasm/wasm.h:158-171 (ids
// carry the type in their low two bits, step 4 per type) and Envoy
// source/extensions/common/wasm/context.cc (Context::defineMetric: a new id
// per definition, one stat per name; incrementMetric: a counter takes only
// a positive offset; recordMetric: a counter adds).
func TestMetrics(t *testing.T) {
	m := newMetrics(nil)
	id, _ := m.define(MetricCounter, "c")
	again, _ := m.define(MetricCounter, "c")
	if id != 4 || again != 8 {
		t.Fatalf("counter ids %d, %d; want 4, 8", id, again)
	}
	for _, d := range []int64{-1, 0} {
		if st := m.increment(id, d); st != StatusBadArgument {
			t.Fatalf("incrementing a counter by %d: %v, want BadArgument", d, st)
		}
	}
	m.increment(id, 2)
	m.record(again, 3)
	if v, _ := m.value(id); v != 5 {
		t.Fatalf("counter %d after +2 and record 3 (through both ids), want 5", v)
	}
	g, _ := m.define(MetricGauge, "g")
	m.increment(g, 5)
	m.increment(g, -2)
	m.record(g, 9)
	hist, _ := m.define(MetricHistogram, "h")
	if g != 5 || hist != 6 {
		t.Fatalf("gauge id %d, histogram id %d; want 5, 6", g, hist)
	}
	m.record(hist, 3)
	m.record(hist, 4)
	if v, _ := m.Value("g"); v != 9 {
		t.Fatalf("gauge %d, want 9", v)
	}
	if s := m.Snapshot(); s[1].Name != "g" || s[2].Count != 2 || s[2].Sum != 7 {
		t.Fatalf("snapshot %+v", s)
	}
	if _, st := m.define(MetricType(7), "x"); st != StatusBadArgument {
		t.Fatalf("unknown metric type: %v", st)
	}
	if _, st := m.value(hist); st != StatusBadArgument {
		t.Fatalf("reading a histogram: %v, want BadArgument", st)
	}
}

func TestPropertiesEncoding(t *testing.T) {
	p := NewProperties()
	p.SetInt([]string{"listener_direction"}, 1)
	p.SetBool([]string{"connection", "mtls"}, true)
	p.SetMap([]string{"xds", "node", "metadata", "LABELS"}, map[string]string{"b": "2", "a": "1"})
	for path, want := range map[string][]byte{
		"listener_direction":                     {1, 0, 0, 0, 0, 0, 0, 0},
		"connection\x00mtls":                     {1},
		"xds\x00node\x00metadata\x00LABELS\x00a": []byte("1"),
		// A map reads as serialized pairs, as Envoy's serializeValue writes a
		// CEL map (source/extensions/common/wasm/context.cc, case kMap):
		// count 2, sizes (1,1) (1,1), then "a\0" "1\0" "b\0" "2\0".
		"xds\x00node\x00metadata\x00LABELS": {2, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0,
			'a', 0, '1', 0, 'b', 0, '2', 0},
	} {
		if got, ok := p.Get(path); !ok || !bytes.Equal(got, want) {
			t.Errorf("%q = %v, want %v", path, got, want)
		}
	}
}

func TestSplitPath(t *testing.T) {
	got := SplitPath(`xds.node.metadata.LABELS.topology\.kubernetes\.io/zone`)
	want := []string{"xds", "node", "metadata", "LABELS", "topology.kubernetes.io/zone"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("SplitPath = %q", got)
	}
}
