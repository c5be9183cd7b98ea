package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/spf13/cobra"

	"github.com/loctree/loctree/loader/source"
	"github.com/loctree/loctree/loader/source/xds"
)

// xdsFlags are the flags of --source xds: istiod's address, how to
// authenticate to it, and the identity istiod knows the agent by (as
// ztunnel's: its pod, namespace, node and cluster).
type xdsFlags struct {
	address, caFile, serverName, tokenFile string
	namespace, pod, instanceIP             string
}

func (x *xdsFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&x.address, "xds-address", "", "with --source xds: istiod's xDS address HOST:PORT (istiod.istio-system.svc:15012 with --xds-ca-file and --xds-token-file; :15010 is plaintext)")
	f.StringVar(&x.caFile, "xds-ca-file", "", "with --source xds: PEM CA certificates istiod's certificate must chain to (the istio-ca-root-cert ConfigMap's root-cert.pem); makes the connection TLS")
	f.StringVar(&x.serverName, "xds-server-name", "", "with --xds-ca-file: the name istiod's certificate must carry (default: the host of --xds-address)")
	f.StringVar(&x.tokenFile, "xds-token-file", "", "with --source xds: a service-account token file sent as the bearer token on every stream (a projected token with audience istio-ca); needs --xds-ca-file")
	f.StringVar(&x.namespace, "xds-namespace", "", "with --source xds: the agent's namespace (the downward API's metadata.namespace; istiod checks it against the token)")
	f.StringVar(&x.pod, "xds-pod-name", "", "with --source xds: the agent's pod name (the downward API's metadata.name)")
	f.StringVar(&x.instanceIP, "xds-instance-ip", "", "with --source xds: the agent's pod IP (the downward API's status.podIP; default 1.1.1.1, as ztunnel)")
}

// check validates the flags of --source xds without connecting.
func (x *xdsFlags) check(node string) error {
	if x.address == "" {
		return fmt.Errorf("--source xds needs --xds-address (istiod's xDS address, e.g. istiod.istio-system.svc:15012)")
	}
	if _, _, err := net.SplitHostPort(x.address); err != nil {
		return fmt.Errorf("--xds-address %q: want HOST:PORT: %w", x.address, err)
	}
	if node == "" {
		return fmt.Errorf("--source xds needs --node (the downward API's spec.nodeName): the agent's locality is that of the workloads istiod places on it")
	}
	if x.tokenFile != "" && x.caFile == "" {
		return fmt.Errorf("--xds-token-file needs --xds-ca-file: a token is only sent over TLS")
	}
	if x.serverName != "" && x.caFile == "" {
		return fmt.Errorf("--xds-server-name needs --xds-ca-file")
	}
	if x.instanceIP != "" && net.ParseIP(x.instanceIP) == nil {
		return fmt.Errorf("--xds-instance-ip %q: not an IP address", x.instanceIP)
	}
	for flag, path := range map[string]string{"--xds-ca-file": x.caFile, "--xds-token-file": x.tokenFile} {
		if path == "" {
			continue
		}
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("%s: %w", flag, err)
		}
	}
	return nil
}

// open returns the xDS source.
func (x *xdsFlags) open(node, clusterID string, log *slog.Logger) (source.Source, error) {
	cfg := xds.Config{
		Address: x.address, TokenFile: x.tokenFile, NodeName: node, ClusterID: clusterID,
		Namespace: x.namespace, PodName: x.pod, InstanceIP: x.instanceIP, Logger: log,
	}
	if x.caFile != "" {
		name := x.serverName
		if name == "" {
			name, _, _ = net.SplitHostPort(x.address)
		}
		var err error
		if cfg.TLS, err = xds.TLSConfig(x.caFile, name); err != nil {
			return nil, fmt.Errorf("--xds-ca-file: %w", err)
		}
	}
	return xds.New(cfg)
}
