package topology

import (
	"testing"

	"github.com/loctree/loctree/shared"
)

// A warning names the nearest known value, else lists the known values.
func TestWarningText(t *testing.T) {
	w := shared.Warning{Service: "api", Field: "failover[0].to", Value: "ap-soth", Known: []string{"ap-south", "us-east"}, Problem: "p"}
	if got, want := WarningText(w), `service "api": failover[0].to "ap-soth": p; did you mean "ap-south"?`; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	w.Value = "mars"
	if got, want := WarningText(w), `service "api": failover[0].to "mars": p (known: ap-south, us-east)`; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
