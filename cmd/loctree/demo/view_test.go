package demo

import (
	"strings"
	"testing"
)

// The view draws, per source, the share of each plane's answers per
// locality, with bars; the failover phase's candidates are us-east-1b's.
func TestDrawPhase(t *testing.T) {
	d := &demo{}
	res, err := d.newPhase(phases[1], 2)
	if err != nil {
		t.Fatal(err)
	}
	src := &res.Sources[0] // us-east-1a
	if len(src.Candidates) != 1 || src.Candidates[0] != "127.0.77.3:9080" {
		t.Fatalf("failover candidates of us-east-1a: %v", src.Candidates)
	}
	for range 3 {
		src.Kernel.add("127.0.77.3:9080", nil, src.Candidates)
	}
	src.L7.add("127.0.77.3:9080", nil, src.Candidates)
	src.L7.add("127.0.77.1:9080", nil, src.Candidates) // outside: counted, and shown
	var b strings.Builder
	d.drawLocked(&b, res, 1)
	out := b.String()
	for _, want := range []string{
		"phase 2/3 failover",
		"from us-east/us-east-1a",
		"us-east/us-east-1b         ████████████████████ 100.0%     3   ██████████··········  50.0%     1",
		"outside the candidates: kernel 0, L7 1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("view lacks %q:\n%s", want, out)
		}
	}
}

// TestDrawTraffic: the matrices are drawn with the source zones as rows
// and the destination zones as columns, kernel then L7, and the shares
// of the placed picks.
func TestDrawTraffic(t *testing.T) {
	m, err := parseAgentMatrix(strings.NewReader(`# HELP loctree_traffic_connections_total x
loctree_traffic_connections_total{scope="zone",source="za",destination="za"} 6
loctree_traffic_connections_total{scope="zone",source="za",destination="zb"} 2
loctree_traffic_placed_connections_total{scope="zone"} 8
loctree_traffic_cross_connections_total{scope="zone"} 2
loctree_traffic_nolocality_cross_connections_total{scope="zone"} 4.5
`))
	if err != nil {
		t.Fatal(err)
	}
	var l7 Matrix
	l7.add("za", "zb", 3)
	l7.Placed, l7.Cross, l7.NoLocality = 3, 3, 3
	var b strings.Builder
	drawTraffic(&b, Traffic{Kernel: m, L7: l7})
	for _, want := range []string{
		"  from \\ to        za        zb |        za        zb\n", // columns as wide as "from \ to"
		"  za                6         2 |         0         3\n",
		"cross-zone: kernel 25.0% (no locality: 56.2%) | L7 100.0% (no locality: 100.0%)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("view lacks %q:\n%s", want, b.String())
		}
	}
}
