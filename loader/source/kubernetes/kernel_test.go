package kubernetes_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/loctree/loctree/host"
	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/internal/testing/wasmtest"
	"github.com/loctree/loctree/loader"
	"github.com/loctree/loctree/loader/kernel"
	"github.com/loctree/loctree/loader/source/kubernetes"
	"github.com/loctree/loctree/shared"
)

const vip = "127.77.10.1:9080"

// TestKernelFromKubernetes: the fake API feeds the Kubernetes source; each
// Update is built and installed into the kernel with the agent's Installer,
// exactly as the agent does with a topology file, and served by its
// TreeServer over real HTTP. Real TCP connections to the Service's VIP land
// where the tree says for this node's locality (from its Node object), follow
// an endpoint going unready, internalTrafficPolicy: Local (strict, refused)
// and the Service's deletion; and the real filter .wasm in the wazero host,
// fetching the served tree, makes the same choice each time.
func TestKernelFromKubernetes(t *testing.T) {
	kerneltest.RequireRoot(t)
	kerneltest.Backends(t, []string{"127.0.10.1:10080", "127.0.10.2:10080", "127.0.10.3:10080"})
	client := fake.NewClientset(kernelObjects()...)
	k := startKernelAgent(t, client)
	filter := newFilter(t, k.url, k.locality)
	expect(t, "127.0.10.1:10080") // same subzone as n1
	filter.expect(t, "127.0.10.1:10080")

	sl, _ := client.DiscoveryV1().EndpointSlices("default").Get(context.Background(), "reviews-a", metav1.GetOptions{})
	sl.Endpoints[0].Conditions.Ready = ptr.To(false)
	ok(t)(client.DiscoveryV1().EndpointSlices("default").Update(context.Background(), sl, metav1.UpdateOptions{}))
	k.installNext(t, 2)
	expect(t, "127.0.10.2:10080") // same region and network, other zone
	filter.expect(t, "127.0.10.2:10080")

	svc, _ := client.CoreV1().Services("default").Get(context.Background(), "reviews", metav1.GetOptions{})
	svc.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
	ok(t)(client.CoreV1().Services("default").Update(context.Background(), svc, metav1.UpdateOptions{}))
	k.installNext(t, 3)
	if got, err := kerneltest.Ask(vip); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("strict [node] with n1's endpoint unready: got %q, %v; want ECONNREFUSED", got, err)
	}
	filter.expect(t, "503")

	if err := client.CoreV1().Services("default").Delete(context.Background(), "reviews", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	k.installNext(t, 4)
	if got, err := kerneltest.Ask(vip); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("after the Service's deletion: got %q, %v; want ECONNREFUSED (no redirect, nothing on the VIP)", got, err)
	}
	filter.expect(t, "") // unknown service: untouched
}

// wasmFilter is one VM of the real filter .wasm, fetching the tree from the
// agent's TreeServer, with this node's locality.
type wasmFilter struct {
	vm *host.VM
}

func newFilter(t *testing.T, agentURL string, loc shared.Locality) *wasmFilter {
	t.Helper()
	module := wasmtest.Bytes(t, "../../../filter")
	const cluster = "outbound|15099||loctree-agent.loctree-system.svc.cluster.local"
	conf, _ := json.Marshal(map[string]any{"tree": map[string]any{"cluster": cluster}, "locality": loc})
	h, err := host.New(context.Background(), module, host.Options{PluginConfig: conf, ManualTicks: true,
		Upstreams: map[string]string{cluster: agentURL}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	vm, err := h.NewVM(context.Background())
	if err != nil {
		t.Fatalf("filter start: %v (%v)", err, h.Logs())
	}
	return &wasmFilter{vm: vm}
}

// expect fetches the current tree and checks the filter's choice for a
// request to reviews: want is the endpoint it writes first, "503" for its
// strict no-candidate answer, "" for no header at all.
func (f *wasmFilter) expect(t *testing.T, want string) {
	t.Helper()
	if err := f.vm.Tick(); err != nil {
		t.Fatal(err)
	}
	f.vm.WaitHTTPCalls()
	props := host.NewProperties()
	props.SetString(host.SplitPath("xds.cluster_name"), "outbound|9080||reviews.default.svc.cluster.local")
	res, err := f.vm.Do(context.Background(), &host.Request{
		Headers:    host.Headers{{":method", "GET"}, {":path", "/"}, {":scheme", "http"}, {":authority", "reviews:9080"}},
		Properties: props,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := res.Request.Headers.Get("x-gateway-destination-endpoint")
	got, _, _ = strings.Cut(got, ",")
	if res.Local != nil {
		got = strconv.Itoa(res.Local.Status)
	}
	if got != want {
		t.Fatalf("filter chose %q, the kernel %q", got, want)
	}
}

func kernelObjects() []runtime.Object {
	node := func(name, region, zone, subzone string) *corev1.Node {
		l := map[string]string{kubernetes.LabelRegion: region, kubernetes.LabelZone: zone, kubernetes.LabelNetwork: "net1"}
		if subzone != "" {
			l[kubernetes.LabelSubzone] = subzone
		}
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "reviews"},
		Spec: corev1.ServiceSpec{
			ClusterIP: "127.77.10.1", ClusterIPs: []string{"127.77.10.1"}, TrafficDistribution: ptr.To("PreferClose"),
			Ports: []corev1.ServicePort{{Name: "http", Port: 9080, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(10080)}},
		},
	}
	ep := func(addr, node string) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{addr}, NodeName: ptr.To(node), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}
	}
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "reviews-a", Labels: map[string]string{discoveryv1.LabelServiceName: "reviews"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](10080), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints:   []discoveryv1.Endpoint{ep("127.0.10.1", "n1"), ep("127.0.10.2", "n2"), ep("127.0.10.3", "n3")},
	}
	return []runtime.Object{node("n1", "r1", "z1", "s1"), node("n2", "r1", "z2", ""), node("n3", "r2", "z3", ""), svc, sl}
}

func startSource(t *testing.T, client *fake.Clientset, updates chan kubernetes.Update) {
	t.Helper()
	src, err := kubernetes.New(kubernetes.Config{Client: client, NodeName: "n1", ClusterID: "c1",
		Debounce: 5 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, func(u kubernetes.Update) error { updates <- u; return nil }) }()
	t.Cleanup(func() { cancel(); <-done })
}

// kernelAgent is the agent's parts driven update by update: a Source on a
// fake API (node n1), an installer attached to a private cgroup, and a tree
// server.
type kernelAgent struct {
	updates  chan kubernetes.Update
	in       *kernel.Installer
	trees    loader.TreeServer
	url      string
	locality shared.Locality // n1's, from the first update
}

// startKernelAgent starts a Source on client and installs its first update
// with one service as generation 1, with the programs attached; everything
// stops when the test ends.
func startKernelAgent(t *testing.T, client *fake.Clientset) *kernelAgent {
	t.Helper()
	k := &kernelAgent{updates: make(chan kubernetes.Update, 64)}
	startSource(t, client, k.updates)
	first := next(t, k.updates, func(u kubernetes.Update) bool { return len(u.Topology.Services) == 1 })
	k.locality = first.Locality
	in, err := kernel.Open(kernel.Config{Locality: first.Locality, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	k.in = in
	srv := httptest.NewServer(&k.trees)
	t.Cleanup(srv.Close)
	k.url = srv.URL
	install(t, in, &k.trees, k.url, first, 1)
	if err := in.Attach(kerneltest.Cgroup(t)); err != nil {
		t.Fatal(err)
	}
	return k
}

// installNext installs the next update that changes the reviews Service as
// generation gen.
func (k *kernelAgent) installNext(t *testing.T, gen uint64) {
	t.Helper()
	install(t, k.in, &k.trees, k.url, next(t, k.updates, changed), gen)
}

func changed(u kubernetes.Update) bool {
	return slices.Contains(u.Changed, "reviews.default.svc.cluster.local")
}

// next returns the first update that satisfies ok.
func next(t *testing.T, updates chan kubernetes.Update, ok func(kubernetes.Update) bool) kubernetes.Update {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case u := <-updates:
			if ok(u) {
				return u
			}
		case <-timeout:
			t.Fatal("no matching update from the Kubernetes source")
		}
	}
}

// install builds u as generation gen, installs it and checks that the tree
// server serves exactly those bytes.
func install(t *testing.T, in *kernel.Installer, trees *loader.TreeServer, url string, u kubernetes.Update, gen uint64) {
	t.Helper()
	tree, err := shared.Build(u.Topology, shared.BuildOptions{Generation: gen})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Apply(tree); err != nil {
		t.Fatal(err)
	}
	trees.Set(tree)
	resp, err := http.Get(url + "/v1/tree")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	served, err := shared.Decode(body)
	if err != nil || !bytes.Equal(served.Bytes(), tree.Bytes()) || served.Generation() != gen {
		t.Fatalf("tree server: %v, generation %d; want the installed generation %d", err, served.Generation(), gen)
	}
}

// expect connects to the VIP several times and wants want every time.
func expect(t *testing.T, want string) {
	t.Helper()
	for range 8 {
		got, err := kerneltest.Ask(vip)
		if err != nil || got != want {
			t.Fatalf("connect %s: got %q, %v; want %s", vip, got, err, want)
		}
	}
}

// ok checks the (object, error) results of a client call.
func ok(t *testing.T) func(any, error) {
	return func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestAgentRunsKubernetesSource: loader.Run with the Kubernetes source (what
// `loctree agent --source kubernetes` runs) installs the first update,
// follows a relabel of its own Node (the source labels of every service are
// re-derived), an endpoint going unready and the deletion of its only
// Service (an empty tree), and serves each generation.
func TestAgentRunsKubernetesSource(t *testing.T) {
	kerneltest.RequireRoot(t)
	kerneltest.Backends(t, []string{"127.0.10.1:10080", "127.0.10.2:10080", "127.0.10.3:10080"})
	client := fake.NewClientset(kernelObjects()...)
	src, err := kubernetes.New(kubernetes.Config{Client: client, NodeName: "n1", ClusterID: "c1",
		Debounce: 5 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	listen := kerneltest.FreeAddr(t)
	kubernetes.RunAgent(t, loader.AgentConfig{Source: src, Cgroup: kerneltest.Cgroup(t), BPFFS: kerneltest.BPFFS(t),
		Listen: listen, Logger: slog.New(slog.DiscardHandler)})
	kerneltest.Eventually(t, 20*time.Second, "127.0.10.1 (n1's subzone)", func() error { return reached(ask(), "127.0.10.1:10080") })
	gen := generation(t, listen)

	n1, _ := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	n1.Labels[kubernetes.LabelRegion], n1.Labels[kubernetes.LabelZone] = "r2", "z3"
	delete(n1.Labels, kubernetes.LabelSubzone)
	ok(t)(client.CoreV1().Nodes().Update(context.Background(), n1, metav1.UpdateOptions{}))
	// With the old source locality (r1/z1/s1) every pick would be 127.0.10.2;
	// from r2/z3 the candidates are n1's and n3's endpoints.
	gen = nextGeneration(t, listen, gen)
	checkPicks(t, "127.0.10.1:10080", "127.0.10.3:10080")

	sl, _ := client.DiscoveryV1().EndpointSlices("default").Get(context.Background(), "reviews-a", metav1.GetOptions{})
	sl.Endpoints[0].Conditions.Ready = ptr.To(false)
	ok(t)(client.DiscoveryV1().EndpointSlices("default").Update(context.Background(), sl, metav1.UpdateOptions{}))
	gen = nextGeneration(t, listen, gen)
	checkPicks(t, "127.0.10.3:10080")

	// The last managed Service goes: an empty tree is installed, not refused.
	if err := client.CoreV1().Services("default").Delete(context.Background(), "reviews", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	nextGeneration(t, listen, gen)
	if got, err := kerneltest.Ask(vip); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("after the last Service's deletion: got %q, %v; want ECONNREFUSED (nothing on the VIP)", got, err)
	}
}

// nextGeneration waits until the agent serves a generation after gen.
func nextGeneration(t *testing.T, listen string, gen uint64) uint64 {
	t.Helper()
	var g uint64
	kerneltest.Eventually(t, 20*time.Second, "a new generation", func() error {
		if g = generation(t, listen); g <= gen {
			return fmt.Errorf("still generation %d", g)
		}
		return nil
	})
	return g
}

// checkPicks: 40 connections land in want, each of want at least once
// (random policy: a miss has probability below 1e-11).
func checkPicks(t *testing.T, want ...string) {
	t.Helper()
	seen := map[string]int{}
	for range 40 {
		got := ask()
		if !slices.Contains(want, got) {
			t.Fatalf("connected to %q, want one of %v", got, want)
		}
		seen[got]++
	}
	if len(seen) != len(want) {
		t.Fatalf("picks %v, want each of %v", seen, want)
	}
}

// reached is nil when got is the wanted endpoint.
func reached(got, endpoint string) error {
	if got != endpoint {
		return fmt.Errorf("the VIP reached %q, want %s", got, endpoint)
	}
	return nil
}

func ask() string {
	got, _ := kerneltest.Ask(vip)
	return got
}

// generation is the generation of the tree the agent serves.
func generation(t *testing.T, listen string) uint64 {
	t.Helper()
	resp, err := http.Get("http://" + listen + "/v1/tree")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	tree, err := shared.Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	return tree.Generation()
}
