package realcp

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WriteKubeconfig writes a kubeconfig file for cfg (Admin, or a
// ServiceAccountConfig) to path, as kubectl and `loctree agent
// --kubeconfig` read it.
func WriteKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["realcp"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["realcp"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["realcp"] = &clientcmdapi.Context{Cluster: "realcp", AuthInfo: "realcp", Namespace: "default"}
	kc.CurrentContext = "realcp"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}
