package realcp

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the control plane's throw-away PKI, written as PEM files into one
// directory: a serving CA and the API server's certificate for 127.0.0.1, a
// client CA (the API server's x509 authenticator), and the key pair that
// signs and verifies service-account tokens.
type pki struct {
	caCert, servingCert, servingKey, clientCA, saKey, saPub string // file paths
	caPEM                                                   []byte
}

// certLife bounds every certificate: a control plane lives for one test run.
const certLife = 7 * 24 * time.Hour

func newPKI(dir string) (*pki, error) {
	p := &pki{
		caCert: filepath.Join(dir, "ca.crt"), servingCert: filepath.Join(dir, "apiserver.crt"),
		servingKey: filepath.Join(dir, "apiserver.key"), clientCA: filepath.Join(dir, "client-ca.crt"),
		saKey: filepath.Join(dir, "sa.key"), saPub: filepath.Join(dir, "sa.pub"),
	}
	ca, caKey, err := newCA("loctree-realcp-ca")
	if err != nil {
		return nil, err
	}
	p.caPEM = pemBlock("CERTIFICATE", ca.Raw)
	if err := p.writeServing(ca, caKey); err != nil {
		return nil, err
	}
	clientCA, _, err := newCA("loctree-realcp-client-ca")
	if err != nil {
		return nil, err
	}
	if err := writeFile(p.clientCA, pemBlock("CERTIFICATE", clientCA.Raw)); err != nil {
		return nil, err
	}
	return p, p.writeServiceAccountKeys()
}

func newKey() (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	return k, nil
}

func newCA(name string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	tmpl := template(name)
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("create ca %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parse ca %s: %w", name, err)
	}
	return cert, key, nil
}

func template(name string) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certLife),
	}
}

// writeServing writes the API server's certificate: valid for 127.0.0.1
// and localhost only, as nothing else is ever dialled.
func (p *pki) writeServing(ca *x509.Certificate, caKey *ecdsa.PrivateKey) error {
	key, err := newKey()
	if err != nil {
		return err
	}
	tmpl := template("kube-apiserver")
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	tmpl.IPAddresses, tmpl.DNSNames = []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return fmt.Errorf("create serving certificate: %w", err)
	}
	if err := writeFile(p.caCert, p.caPEM); err != nil {
		return err
	}
	if err := writeFile(p.servingCert, pemBlock("CERTIFICATE", der)); err != nil {
		return err
	}
	return writeKey(p.servingKey, key)
}

func (p *pki) writeServiceAccountKeys() error {
	key, err := newKey()
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return fmt.Errorf("marshal service-account public key: %w", err)
	}
	if err := writeFile(p.saPub, pemBlock("PUBLIC KEY", pub)); err != nil {
		return err
	}
	return writeKey(p.saKey, key)
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("marshal key: %w", err)
	}
	return writeFile(path, pemBlock("EC PRIVATE KEY", der))
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func writeFile(path string, data []byte) error {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
