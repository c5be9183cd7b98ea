package kubernetes

import (
	"errors"
	"testing"

	"github.com/loctree/loctree/shared"
)

// FuzzParseScopes: any annotation value is either rejected with
// ErrBadAnnotation or gives scopes that shared.Build accepts.
func FuzzParseScopes(f *testing.F) {
	for _, s := range []string{"region,zone", " network , region ", "zome", "", ",", "a/b,a/b", "example.com/rack,node"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		scopes, err := parseScopes(v)
		if err != nil {
			if !errors.Is(err, ErrBadAnnotation) {
				t.Fatalf("error %v does not wrap ErrBadAnnotation", err)
			}
			return
		}
		top := &shared.Topology{Services: []shared.ServiceSpec{{Name: "s", Scopes: scopes,
			Endpoints: []shared.EndpointSpec{{Address: "127.0.0.1:80"}}}}}
		if _, err := shared.Build(top, shared.BuildOptions{}); err != nil {
			t.Fatalf("scopes %q accepted but Build says: %v", scopes, err)
		}
	})
}
