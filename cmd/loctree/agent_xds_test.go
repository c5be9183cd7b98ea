package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAgentXDSFlags: every mistake in the flags of --source xds fails
// before anything is installed, naming the flag and what to give.
func TestAgentXDSFlags(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := "agent --source xds --cgroup /x --bpffs /y "
	for args, want := range map[string]string{
		base:                                "--source xds needs --xds-address",
		base + "--xds-address istiod":       `--xds-address "istiod": want HOST:PORT`,
		base + "--xds-address istiod:15012": "--source xds needs --node",
		base + "--xds-address istiod:15012 --node n1 --xds-token-file " + notPEM:        "--xds-token-file needs --xds-ca-file",
		base + "--xds-address istiod:15012 --node n1 --xds-server-name istiod":          "--xds-server-name needs --xds-ca-file",
		base + "--xds-address istiod:15012 --node n1 --xds-instance-ip x":               `--xds-instance-ip "x": not an IP address`,
		base + "--xds-address istiod:15012 --node n1 --xds-ca-file " + dir + "/missing": "--xds-ca-file: stat",
	} {
		code, _, errs := runCLI(t, strings.Fields(args)...)
		if code != 1 || !strings.Contains(errs, want) {
			t.Errorf("%s: exit %d, stderr %q (want %q)", args, code, errs, want)
		}
	}
}

// TestAgentXDSOpen: a CA file without a certificate is refused when the
// source is made, naming the flag; a good one gives an xDS source.
func TestAgentXDSOpen(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	x := xdsFlags{address: "istiod.istio-system.svc:15012", caFile: notPEM}
	if _, err := x.open("n1", "", nil); err == nil || !strings.Contains(err.Error(), "--xds-ca-file: xds CA "+notPEM+": no PEM certificate") {
		t.Errorf("not a PEM CA: %v", err)
	}
	x.caFile = ""
	if src, err := x.open("n1", "", nil); err != nil || src == nil {
		t.Errorf("plaintext: %v, %v", src, err)
	}
}

// TestXDSOverlayArgs: the agent arguments of istio/overlays/xds are flags
// `loctree agent` has, with the xDS source and its identity selected.
func TestXDSOverlayArgs(t *testing.T) {
	cmd := parseAgentArgs(t, "overlays/xds/daemonset-patch.yaml")
	for flag, want := range map[string]string{"source": "xds", "node": "n1", "xds-namespace": "loctree-system", "xds-pod-name": "loctree-agent-x",
		"xds-address": "istiod.istio-system.svc:15012", "xds-ca-file": "/var/run/secrets/istio/root-cert.pem", "xds-token-file": "/var/run/secrets/tokens/istio-token"} {
		if got := cmd.Flags().Lookup(flag).Value.String(); got != want {
			t.Errorf("--%s = %q, want %q", flag, got, want)
		}
	}
}
