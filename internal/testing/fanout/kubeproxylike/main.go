// Command kubeproxylike watches what kube-proxy watches, the way it does:
// the baseline of the fan-out measurement (internal/testing/fanout). It
// follows k8s.io/kubernetes v1.37.2 cmd/kube-proxy/app/server.go
// (ProxyServer.Run): shared informers for Services (label
// service.kubernetes.io/service-proxy-name absent, spec.clusterIP != None),
// EndpointSlices (label service.kubernetes.io/headless absent) and its own
// Node (pkg/proxy/node.go, NewNodeManager: metadata.name = the node), managed
// fields trimmed, over protobuf (pkg/proxy/apis/config/v1alpha1/defaults.go:
// ClientConnection.ContentType). It leaves out the ServiceCIDRs kube-proxy
// also watches with MultiCIDRServiceAllocator, which loctree does not need.
//
// It prints "synced" once every cache has synced, then "slice NS/NAME RV"
// for every EndpointSlice added or updated.
//
//	kubeproxylike --kubeconfig FILE --node NAME
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// kube-proxy's default --config-sync-period (a client-side resync only).
const resync = 15 * time.Minute

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file")
	node := flag.String("node", "", "this node's name")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *kubeconfig, *node); err != nil {
		fmt.Fprintln(os.Stderr, "kubeproxylike:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, node string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	factories, err := newFactories(client, node)
	if err != nil {
		return err
	}
	slices := factories[1].Discovery().V1().EndpointSlices().Informer()
	if _, err := slices.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { printSlice(obj) },
		UpdateFunc: func(_, obj any) { printSlice(obj) },
	}); err != nil {
		return err
	}
	synced := []cache.InformerSynced{
		factories[0].Core().V1().Services().Informer().HasSynced, slices.HasSynced,
		factories[2].Core().V1().Nodes().Informer().HasSynced,
	}
	for _, f := range factories {
		f.Start(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return ctx.Err()
	}
	fmt.Println("synced")
	<-ctx.Done()
	for _, f := range factories {
		f.Shutdown()
	}
	return nil
}

// newFactories are kube-proxy's informer factories: Services, EndpointSlices
// and its own Node.
func newFactories(client kubernetes.Interface, node string) ([]informers.SharedInformerFactory, error) {
	noProxyName, err := labels.NewRequirement("service.kubernetes.io/service-proxy-name", selection.DoesNotExist, nil)
	if err != nil {
		return nil, err
	}
	noHeadless, err := labels.NewRequirement(v1.IsHeadlessService, selection.DoesNotExist, nil)
	if err != nil {
		return nil, err
	}
	trim := informers.WithTransform(func(obj any) (any, error) {
		if a, err := meta.Accessor(obj); err == nil {
			a.SetManagedFields(nil)
		}
		return obj, nil
	})
	return []informers.SharedInformerFactory{
		informers.NewSharedInformerFactoryWithOptions(client, resync, trim, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = labels.NewSelector().Add(*noProxyName).String()
			o.FieldSelector = fields.OneTermNotEqualSelector("spec.clusterIP", v1.ClusterIPNone).String()
		})),
		informers.NewSharedInformerFactoryWithOptions(client, resync, trim, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = labels.NewSelector().Add(*noHeadless).String()
		})),
		informers.NewSharedInformerFactoryWithOptions(client, resync, trim, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", node).String()
		})),
	}, nil
}

func printSlice(obj any) {
	if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
		fmt.Printf("slice %s/%s %s\n", s.Namespace, s.Name, s.ResourceVersion)
	}
}
