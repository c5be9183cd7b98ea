package xds

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/loctree/loctree/internal/testing/realcp"
)

// TestRealSecure connects as an agent in a cluster does: TLS to istiod's
// secure xDS port, trusting the root istiod writes to the namespace's
// istio-ca-root-cert ConfigMap and checking istiod's certificate names
// istiod.istio-system.svc, with a service-account token of audience
// istio-ca that istiod reviews with the API server. The source then
// receives the test's Service.
func TestRealSecure(t *testing.T) {
	c := onRealIstiod(t)
	c.node(t, "a", "r1", "z1", "")
	c.service(t, realSvc{name: "web", td: "PreferSameZone"})
	c.pod(t, realPod{name: "w1", node: "a", ip: "100.64.1.1", app: "web", ready: true})
	dir := t.TempDir()
	ca, token := filepath.Join(dir, "root-cert.pem"), filepath.Join(dir, "istio-token")
	c.writeRootCert(t, ca)
	c.writeToken(t, token)
	tlsCfg, err := TLSConfig(ca, "istiod.istio-system.svc")
	if err != nil {
		t.Fatal(err)
	}
	src, err := New(Config{Address: c.istiod.SecureXDSAddress(), TLS: tlsCfg, TokenFile: token, NodeName: c.nodeName("a"),
		Namespace: c.ns, PodName: "agent", Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	v := runView(t, src)
	v.waitFor(t, 20*time.Second, "web over TLS with a token", converged(map[string]int{c.fqdn("web"): 1}))
}

// writeRootCert writes istiod's root certificate, as the namespace's
// istio-ca-root-cert ConfigMap holds it, to path.
func (c *realCluster) writeRootCert(t testing.TB, path string) {
	t.Helper()
	if err := os.WriteFile(path, realcp.IstioRootCert(t, c.admin, c.ns), 0o600); err != nil {
		t.Fatal(err)
	}
}

// writeToken writes a token of the namespace's default service account
// with audience istio-ca to path.
func (c *realCluster) writeToken(t testing.TB, path string) {
	t.Helper()
	if err := os.WriteFile(path, realcp.IstioToken(t, c.admin, c.ns, "default"), 0o600); err != nil {
		t.Fatal(err)
	}
}
