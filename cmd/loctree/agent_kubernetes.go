package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/loctree/loctree/loader/source"
	"github.com/loctree/loctree/loader/source/kubernetes"
)

// kubeFlags are the agent's endpoint-source flags.
type kubeFlags struct {
	kind, kubeconfig, node, clusterID string
	meshConfig                        string
	destinationRules                  bool
	xds                               xdsFlags
}

func (k *kubeFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&k.kind, "source", "file", "where endpoints come from: file (-f, or the example mesh), kubernetes (the API server) or xds (istiod's workload discovery, as ztunnel)")
	f.StringVar(&k.kubeconfig, "kubeconfig", "", "with --source kubernetes: kubeconfig file (default: in-cluster)")
	f.StringVar(&k.node, "node", "", "with --source kubernetes or xds: this node's name (its Node object, or the workloads istiod places on it, give the locality)")
	f.StringVar(&k.clusterID, "cluster-id", "", "with --source kubernetes: the value of the cluster scope; with --source xds: the agent's cluster as istiod knows it (default Kubernetes)")
	f.BoolVar(&k.destinationRules, "destination-rules", true, "with --source kubernetes: follow Istio DestinationRules' localityLbSetting (docs/ISTIO.md)")
	f.StringVar(&k.meshConfig, "istio-mesh-config", "", "with --source kubernetes: Istio's mesh config file (the istio ConfigMap's mesh key) for the mesh default localityLbSetting and rootNamespace (default: Istio's defaults)")
	k.xds.register(cmd)
}

// check validates the flags without connecting anywhere.
func (k *kubeFlags) check() error {
	switch k.kind {
	case "file":
		return nil
	case "kubernetes":
	case "xds":
		return k.xds.check(k.node)
	default:
		return fmt.Errorf("--source %q: want file, kubernetes or xds", k.kind)
	}
	if k.node == "" {
		return fmt.Errorf("--source kubernetes needs --node (the downward API's spec.nodeName)")
	}
	return nil
}

// open returns the source the flags name, nil for the topology file.
func (k *kubeFlags) open(log *slog.Logger) (source.Source, error) {
	if err := k.check(); err != nil || k.kind == "file" {
		return nil, err
	}
	if k.kind == "xds" {
		return k.xds.open(k.node, k.clusterID, log)
	}
	cfg := kubernetes.Config{NodeName: k.node, ClusterID: k.clusterID, Logger: log, Mesh: kubernetes.DefaultMesh()}
	if k.meshConfig != "" {
		data, err := os.ReadFile(k.meshConfig)
		if err != nil {
			return nil, fmt.Errorf("--istio-mesh-config: %w", err)
		}
		if cfg.Mesh, err = kubernetes.ParseMeshConfig(data); err != nil {
			return nil, fmt.Errorf("--istio-mesh-config %s: %w", k.meshConfig, err)
		}
	}
	var err error
	if cfg.Client, err = kubernetes.NewClient(k.kubeconfig); err != nil {
		return nil, err
	}
	if k.destinationRules {
		if cfg.Istio, err = kubernetes.NewIstioClient(k.kubeconfig); err != nil {
			return nil, err
		}
	}
	return kubernetes.New(cfg)
}
