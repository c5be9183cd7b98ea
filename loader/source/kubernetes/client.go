package kubernetes

import (
	"fmt"

	"k8s.io/client-go/dynamic"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	typeddiscoveryv1 "k8s.io/client-go/kubernetes/typed/discovery/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// NewClient connects to the API server: with the kubeconfig file at path, or,
// when path is empty, with the in-cluster configuration (the Pod's service
// account), as the agent does in its DaemonSet.
func NewClient(path string) (Client, error) {
	cfg, err := restConfig(path)
	if err != nil {
		return nil, err
	}
	// Protobuf, as kube-proxy asks (k8s.io/kubernetes v1.37.2
	// pkg/proxy/apis/config/v1alpha1/defaults.go, ClientConnection.ContentType):
	// the API server encodes each watch event once per format for all its
	// watchers, and a node agent should share kube-proxy's.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	core, err := typedcorev1.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	discovery, err := typeddiscoveryv1.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return groups{core, discovery}, nil
}

// NewIstioClient connects to the API server as NewClient does, for
// Istio's resources (DestinationRules), read as unstructured objects: the
// agent does not link Istio's generated clients.
func NewIstioClient(path string) (dynamic.Interface, error) {
	cfg, err := restConfig(path)
	if err != nil {
		return nil, err
	}
	c, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return c, nil
}

// groups is a Client of just the two API groups the source reads.
type groups struct {
	core      typedcorev1.CoreV1Interface
	discovery typeddiscoveryv1.DiscoveryV1Interface
}

func (g groups) CoreV1() typedcorev1.CoreV1Interface                { return g.core }
func (g groups) DiscoveryV1() typeddiscoveryv1.DiscoveryV1Interface { return g.discovery }

// restConfig is the configuration at path (in-cluster when empty), as
// the agent's user agent and with its health-checked transport.
func restConfig(path string) (*rest.Config, error) {
	cfg, err := loadConfig(path)
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "loctree-agent"
	return withHealthCheck(cfg)
}

func loadConfig(path string) (*rest.Config, error) {
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
