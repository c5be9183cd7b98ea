package kubernetes

import (
	"fmt"

	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// NewClient connects to the API server: with the kubeconfig file at path, or,
// when path is empty, with the in-cluster configuration (the Pod's service
// account), as the agent does in its DaemonSet.
func NewClient(path string) (clientset.Interface, error) {
	cfg, err := restConfig(path)
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "loctree-agent"
	c, err := clientset.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return c, nil
}

func restConfig(path string) (*rest.Config, error) {
	if path != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("%w: kubeconfig %s: %w", ErrConfig, path, err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("%w: not in a cluster (%w); give a kubeconfig file", ErrConfig, err)
	}
	return cfg, nil
}
