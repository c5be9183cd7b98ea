package main

import (
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/loctree/loctree/loader/kubernetes"
	"github.com/loctree/loctree/loader/source"
)

// kubeFlags are the agent's endpoint-source flags.
type kubeFlags struct {
	kind, kubeconfig, node, clusterID string
}

func (k *kubeFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&k.kind, "source", "file", "where endpoints come from: file (-f, or the example mesh) or kubernetes")
	f.StringVar(&k.kubeconfig, "kubeconfig", "", "with --source kubernetes: kubeconfig file (default: in-cluster)")
	f.StringVar(&k.node, "node", "", "with --source kubernetes: this node's name (its Node object gives the locality)")
	f.StringVar(&k.clusterID, "cluster-id", "", "with --source kubernetes: the value of the cluster scope")
}

// check validates the flags without connecting anywhere.
func (k *kubeFlags) check() error {
	switch k.kind {
	case "file":
		return nil
	case "kubernetes":
	default:
		return fmt.Errorf("--source %q: want file or kubernetes", k.kind)
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
	client, err := kubernetes.NewClient(k.kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.New(kubernetes.Config{Client: client, NodeName: k.node, ClusterID: k.clusterID, Logger: log})
}
