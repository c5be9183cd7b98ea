package e2e

import (
	"maps"
	"testing"
)

const netHost = "net"

const netVIP = "127.77.65.7:9080"

// netShares are the net service's shares per endpoint (percent) from the
// node source, worked by hand in testdata/spill.yaml from Istio's
// priorities across networks (issue 26 items 3 and 4) and Envoy's loads
// and localities.
var netShares = map[string]float64{"127.0.71.3:9080": 46, "127.0.71.5:9080": 54 * 1.4 / 2.4, "127.0.71.7:9080": 54 / 2.4}

// cluHost, cluVIP and cluShares are the clu service's, worked by hand in
// testdata/spill.yaml from Istio's priorities and Envoy's localities
// across clusters (a cluster before region, no failover rule).
const (
	cluHost = "clu"
	cluVIP  = "127.77.65.8:9080"
)

var cluShares = map[string]float64{"127.0.72.3:9080": 100 * 1.4 / 3.8, "127.0.72.5:9080": 100 * 1.4 / 3.8, "127.0.72.7:9080": 100 / 3.8}

// clsHost, clsVIP and clsShares are the cls service's, worked by hand in
// testdata/spill.yaml from Istio's priorities by class before the locality
// (network and cluster before region, a failover rule) and Envoy's loads.
const (
	clsHost = "cls"
	clsVIP  = "127.77.65.9:9080"
)

var clsShares = map[string]float64{"127.0.73.2:9080": 46, "127.0.73.4:9080": 46, "127.0.73.5:9080": 4, "127.0.73.10:9080": 4}

// checkClasses tests the cls service's picks against clsShares.
func checkClasses(t *testing.T, plane string, picks map[string]int) {
	t.Helper()
	checkPriorityShares(t, plane, "cls", picks, clsShares)
}

// checkNetwork tests the net service's picks per endpoint against
// netShares (chi-square at p = 0.001, 2 df); no pick outside them.
func checkNetwork(t *testing.T, plane string, picks map[string]int) {
	t.Helper()
	checkPriorityShares(t, plane, "net", picks, netShares)
}

// checkCluster tests the clu service's picks against cluShares.
func checkCluster(t *testing.T, plane string, picks map[string]int) {
	t.Helper()
	checkPriorityShares(t, plane, "clu", picks, cluShares)
}

// chi2Limit is the chi-square at p = 0.001 by degrees of freedom.
var chi2Limit = map[int]float64{1: 10.83, 2: 13.82, 3: 16.27, 4: 18.47}

func checkPriorityShares(t *testing.T, plane, name string, picks map[string]int, shares map[string]float64) {
	t.Helper()
	chi2 := 0.0
	for addr, n := range picks {
		if shares[addr] == 0 {
			t.Errorf("%s: %d %s picks of %s, which Istio's priorities give no share", plane, n, name, addr)
		}
	}
	for addr, share := range shares {
		e := float64(spreadAsks) * share / 100
		chi2 += (float64(picks[addr]) - e) * (float64(picks[addr]) - e) / e
	}
	if limit := chi2Limit[len(shares)-1]; chi2 > limit {
		t.Errorf("%s: %s picks %v give chi-square %.1f (limit %.2f, %d df) against %v", plane, name, picks, chi2, limit, len(shares)-1, shares)
	}
	t.Logf("%s: %s picks %v (chi-square %.2f)", plane, name, picks, chi2)
}

// onNetwork is the node source on network n1 (the net service's source;
// the other services have no scope network and ignore it), any other
// source as it is.
func onNetwork(s spreadSource) spreadSource {
	if s.name != "node" {
		return s
	}
	s.loc = maps.Clone(s.loc)
	s.loc["network"] = "n1"
	return s
}

// inCluster is the node source in cluster c1 (the clu service's source;
// the other services have no scope cluster), any other source as it is.
func inCluster(s spreadSource) spreadSource {
	if s.name != "node" {
		return s
	}
	s.loc = maps.Clone(s.loc)
	s.loc["cluster"] = "c1"
	return s
}
