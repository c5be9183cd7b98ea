package kernel

import (
	"errors"
	"strings"
	"testing"

	"github.com/loctree/loctree/shared"
)

// TestRefusalNamesClasses: a spillover service with two scopes before
// region (docs/FORMAT.md "Classes before the locality") is refused for the
// kernel by name, wrapping ErrNotInKernel; one scope before region is
// installed. Red when Refusal returns nil for every service (a service the
// programs would walk without its classes, picking as no plane should).
func TestRefusalNamesClasses(t *testing.T) {
	for _, c := range []struct {
		scopes  []string
		refused bool
	}{
		{[]string{"network", "cluster", "region", "zone", "subzone"}, true},
		{[]string{"cluster", "env", "region", "zone"}, true},
		{[]string{"cluster", "region", "zone"}, false},
		{[]string{"network", "region", "zone"}, false},
	} {
		loc := shared.Locality{}
		for _, sc := range c.scopes {
			loc[sc] = sc + "-1"
		}
		tree, err := shared.Build(&shared.Topology{Services: []shared.ServiceSpec{{Name: "s", Scopes: c.scopes, Spillover: &shared.SpilloverSpec{},
			Endpoints: []shared.EndpointSpec{{Address: "127.0.0.1:80", Locality: loc}}}}}, shared.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		err = Refusal(tree.Services()[0])
		switch {
		case c.refused && (!errors.Is(err, ErrNotInKernel) || !strings.Contains(err.Error(), "before the locality")):
			t.Errorf("%v: %v, want ErrNotInKernel naming the classes", c.scopes, err)
		case !c.refused && err != nil:
			t.Errorf("%v: %v, want installed", c.scopes, err)
		}
	}
}
