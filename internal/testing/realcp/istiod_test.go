package realcp

import (
	"os"
	"strings"
	"testing"
)

// TestIstioVersionMatchesTools: istiodtools/go.mod requires istio.io/istio
// at IstioVersion, the version istiod's cache directory is keyed by.
func TestIstioVersionMatchesTools(t *testing.T) {
	data, err := os.ReadFile("istiodtools/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "istio.io/istio" {
			if f[1] != IstioVersion {
				t.Errorf("istiodtools/go.mod requires istio.io/istio %s, the cache key says %s", f[1], IstioVersion)
			}
			return
		}
	}
	t.Error("istiodtools/go.mod does not require istio.io/istio")
}
