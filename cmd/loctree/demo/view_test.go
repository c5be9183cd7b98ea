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
