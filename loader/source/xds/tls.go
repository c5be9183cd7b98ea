package xds

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// TLSConfig is the TLS configuration of a secure xDS connection: it trusts
// the CA certificates of caFile (PEM; in a cluster, the istio-ca-root-cert
// ConfigMap's root-cert.pem) and checks that istiod's certificate names
// serverName (empty: the address's host; istiod's certificate names
// istiod.istio-system.svc).
func TLSConfig(caFile, serverName string) (*tls.Config, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("xds CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("xds CA %s: no PEM certificate in it", caFile)
	}
	return &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}, nil
}
