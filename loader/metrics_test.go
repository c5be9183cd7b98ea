package loader

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/loader/kernel"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestMetricsGolden pins the Prometheus text output.
func TestMetricsGolden(t *testing.T) {
	m := newMetrics("")
	m.installed(nil, kernel.Result{Generation: 7, Services: 5, Endpoints: 14, Rewritten: 5, Duration: 3 * time.Millisecond})
	m.installed(nil, kernel.Result{Generation: 8, Services: 5, Endpoints: 15, Rewritten: 1, Duration: 200 * time.Millisecond})
	m.failed()
	m.setRefused(2)
	m.setWarnings(3)
	m.setPins(false)
	m.kernel = func() ([bpf.StatCount]uint64, error) { return [bpf.StatCount]uint64{120, 3, 2, 1, 4}, nil }
	m.picks = func() ([]uint64, error) { return []uint64{35, 0, 60, 5}, nil }
	m.tree = trafficTree(t, false)
	m.traffic = trafficCounts // worked by hand in TestTrafficTally
	var buf bytes.Buffer
	if _, err := m.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "metrics.golden")
	if *update {
		os.WriteFile(golden, buf.Bytes(), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("metrics differ from %s (go test -run MetricsGolden -update):\n%s", golden, buf.String())
	}
}
