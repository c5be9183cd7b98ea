package e2e

import "testing"

const (
	distLocVIP  = "127.77.65.4:9080"
	distLocHost = "distloc"
)

// distLocShares are the distloc service's shares per endpoint (percent),
// for a us-east source (the rule from us-east/*) and for mars (no rule),
// worked by hand in testdata/spill.yaml from Istio's applyLocalityWeights
// and Envoy's effectiveLocalityWeight (issue 26 item 5).
var distLocShares = map[bool]map[string]float64{
	true:  {"127.0.68.1:9080": 1680 / 93.8, "127.0.68.3:9080": 4700 / 93.8, "127.0.68.4:9080": 3000 / 93.8},
	false: {"127.0.68.1:9080": 140 / 7.4, "127.0.68.3:9080": 400 / 7.4, "127.0.68.4:9080": 100 / 7.4, "127.0.68.5:9080": 100 / 7.4},
}

// chi2At001 are chi-square critical values at p = 0.001 by degrees of
// freedom (NIST/SEMATECH e-Handbook 1.3.6.7.4).
var chi2At001 = map[int]float64{1: 10.828, 2: 13.816, 3: 16.266, 4: 18.467}

// checkDistLocality tests the distloc service's picks per endpoint against
// distLocShares (chi-square at p = 0.001); no pick outside them. Weighing
// each target as a whole gives a us-east source's .1 and .3 35 % each and
// mars's four 25 % each.
func checkDistLocality(t *testing.T, plane string, s spreadSource, picks map[string]int) {
	t.Helper()
	want := distLocShares[s.loc["region"] == "us-east"]
	for addr, n := range picks {
		if want[addr] == 0 {
			t.Errorf("%s, %s: %d picks of %s, which Istio's distribute gives no share", plane, s.name, n, addr)
		}
	}
	chi2 := 0.0
	for addr, share := range want {
		e := float64(spreadAsks) * share / 100
		chi2 += (float64(picks[addr]) - e) * (float64(picks[addr]) - e) / e
	}
	if limit := chi2At001[len(want)-1]; chi2 > limit {
		t.Errorf("%s, %s: distloc picks %v give chi-square %.1f (limit %.2f) against Istio+Envoy's per-locality shares %v", plane, s.name, picks, chi2, limit, want)
	}
	t.Logf("%s, %s: distloc picks %v (chi-square %.2f)", plane, s.name, picks, chi2)
}
