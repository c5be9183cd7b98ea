package fanout

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The cluster: services Services of perService endpoints each (one
// EndpointSlice, as the EndpointSlice controller makes up to 100), their
// endpoints spread round robin over nodes Nodes in zones zones of one
// region. Addresses are data (100.64.0.0/10); nothing connects to them.
const (
	namespace  = "fanout"
	services   = 1000
	perService = 100
	zones      = 5
)

func nodeName(i int) string     { return fmt.Sprintf("node-%d", i) }
func serviceName(s int) string  { return fmt.Sprintf("svc-%04d", s) }
func sliceName(s int) string    { return serviceName(s) + "-1" }
func endpointAddr(i int) string { return fmt.Sprintf("100.%d.%d.%d", 64+i>>16, i>>8&0xff, i&0xff) }

// populate creates the namespace, nodes Nodes and the Services and slices.
func populate(t *testing.T, admin kubernetes.Interface, nodes int) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range nodes {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName(i), Labels: map[string]string{
			"topology.kubernetes.io/region": "r0", "topology.kubernetes.io/zone": fmt.Sprintf("z%d", i%zones),
		}}}
		if _, err := admin.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	parallel(t, services, func(s int) error { return createService(ctx, admin, s, nodes) })
	t.Logf("cluster: %d nodes, %d services, %d endpoints, written in %v", nodes, services, services*perService, time.Since(start).Round(time.Second))
}

// parallel runs f(0..n-1) on 8 goroutines and fails the test on an error.
func parallel(t *testing.T, n int, f func(int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func createService(ctx context.Context, admin kubernetes.Interface, s, nodes int) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: serviceName(s), Namespace: namespace},
		Spec: corev1.ServiceSpec{
			Ports:               []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
			TrafficDistribution: ptr.To(corev1.ServiceTrafficDistributionPreferSameZone),
		},
	}
	if _, err := admin.CoreV1().Services(namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create service %d: %w", s, err)
	}
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: sliceName(s), Namespace: namespace,
			Labels: map[string]string{discoveryv1.LabelServiceName: serviceName(s)}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
	}
	for e := range perService {
		i := s*perService + e
		node := i % nodes
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{endpointAddr(i)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			NodeName:   ptr.To(nodeName(node)),
			Zone:       ptr.To(fmt.Sprintf("z%d", node%zones)),
		})
	}
	if _, err := admin.DiscoveryV1().EndpointSlices(namespace).Create(ctx, sl, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create slice %d: %w", s, err)
	}
	return nil
}

// flip flips the readiness of one endpoint of service s's slice and
// returns the resource version the API server stored.
func flip(ctx context.Context, admin kubernetes.Interface, s int) (string, error) {
	c := admin.DiscoveryV1().EndpointSlices(namespace)
	sl, err := c.Get(ctx, sliceName(s), metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	r := sl.Endpoints[0].Conditions.Ready
	sl.Endpoints[0].Conditions.Ready = ptr.To(r != nil && !*r)
	got, err := c.Update(ctx, sl, metav1.UpdateOptions{})
	if err != nil {
		return "", err
	}
	return got.ResourceVersion, nil
}

// usage is a process's CPU time, resident memory and the bytes it has
// read (rchar: every read(2), its sockets' included), from /proc.
type usage struct {
	cpu  time.Duration
	rss  int64 // bytes
	read int64 // bytes
}

// clockTick is USER_HZ, the unit of /proc/PID/stat's times (100 on Linux).
const clockTick = 10 * time.Millisecond

func procUsage(pid int) (usage, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return usage{}, err
	}
	// fields after the command (which may hold spaces): state is field 3
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, _ := strconv.ParseInt(f[12], 10, 64) // field 15
	rss, err := statusKB(pid, "VmRSS:")
	if err != nil {
		return usage{}, err
	}
	read, err := procRead(pid)
	return usage{cpu: time.Duration(utime+stime) * clockTick, rss: rss * 1024, read: read}, err
}

// procRead is /proc/PID/io's rchar.
func procRead(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "rchar:"); ok {
			return strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
		}
	}
	return 0, fmt.Errorf("no rchar in /proc/%d/io", pid)
}

func statusKB(pid int, key string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key); ok {
			return strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", key, pid)
}
