package e2e

import "testing"

const (
	rrwVIP  = "127.77.65.5:9080"
	rrwHost = "rrw"
	lrwVIP  = "127.77.65.6:9080"
	lrwHost = "lrw"
)

// weightedShares are the rrw and lrw services' shares (of 8) for a source
// in us-east/us-east-1a, worked by hand in testdata/spill.yaml: the
// candidates' weights (issue 26 item 6).
var weightedShares = map[string]map[string]int{
	rrwHost: {"127.0.69.1:9080": 1, "127.0.69.2:9080": 2, "127.0.69.3:9080": 5},
	lrwHost: {"127.0.70.1:9080": 1, "127.0.70.2:9080": 2, "127.0.70.3:9080": 5},
}

// checkWeighted tests a plane's picks of host against weightedShares: round
// robin within slack of the exact count (spreadAsks is 75 cycles of 8),
// least request by chi-square at p = 0.001 (the kernel draws by weight at
// random); no pick outside the candidates. Before, every plane spread
// evenly: 200 picks each.
func checkWeighted(t *testing.T, plane, host string, picks map[string]int, slack int) {
	t.Helper()
	want := weightedShares[host]
	chi2 := 0.0
	for addr, w := range want {
		e := float64(spreadAsks*w) / 8
		d := float64(picks[addr]) - e
		chi2 += d * d / e
		if host == rrwHost && (d > float64(slack) || d < -float64(slack)) {
			t.Errorf("%s, %s: %d picks of %s, want %.0f ± %d (its weight %d of 8): %v", plane, host, picks[addr], addr, e, slack, w, picks)
		}
	}
	for addr, n := range picks {
		if want[addr] == 0 {
			t.Errorf("%s, %s: %d picks of %s, no candidate", plane, host, n, addr)
		}
	}
	if chi2 > chi2At001[2] {
		t.Errorf("%s, %s: picks %v give chi-square %.1f (limit %.2f) against the weights 1:2:5", plane, host, picks, chi2, chi2At001[2])
	}
	t.Logf("%s, %s: picks %v (chi-square %.2f)", plane, host, picks, chi2)
}

// weightedPlanes checks `tree pick --count` (shared), the kernel's connects
// and the filter's requests for rrw and lrw from the node source. The
// filter runs two workers, each with its own schedule: slack 2.
func weightedPlanes(t *testing.T, cli, proxy string, s spreadSource, kernel map[string]map[string]int) {
	t.Helper()
	for _, host := range []string{rrwHost, lrwHost} {
		checkWeighted(t, "tree pick", host, pickLocality(t, cli, s, host), 1)
		checkWeighted(t, "kernel", host, kernel[host], 0)
		checkWeighted(t, "filter", host, requests(t, s.name, proxy, host), 2)
	}
}

// weightedConnects counts the kernel's picks for rrw and lrw.
func weightedConnects(t *testing.T, src string) map[string]map[string]int {
	t.Helper()
	out := map[string]map[string]int{rrwHost: {}, lrwHost: {}}
	connects(t, src, rrwVIP, out[rrwHost])
	connects(t, src, lrwVIP, out[lrwHost])
	return out
}
