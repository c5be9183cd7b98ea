package loader

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/internal/testing/syncbuf"
	"github.com/loctree/loctree/loader/kernel"
	"github.com/loctree/loctree/loader/source"
	"github.com/loctree/loctree/shared"
)

// A service with load_aware is refused for the kernel alone, through the
// agent's one update path: the others are installed, its VIP is not
// redirected, the refusal is logged once over later updates and counted in
// loctree_kernel_services_refused, and the tree served to the filters
// keeps it. Without load_aware it is installed again.
func TestAgentLoadAwareNotInKernel(t *testing.T) {
	kerneltest.RequireRoot(t)
	const laVIP, webVIP = "127.77.9.3:80", "127.77.9.4:80"
	const l1, w1, w2 = "127.0.9.5:9009", "127.0.9.6:9009", "127.0.9.7:9009"
	kerneltest.Backends(t, []string{l1, w1, w2})
	la := func(loadAware bool) shared.ServiceSpec {
		s := shared.ServiceSpec{Name: "la", VIP: laVIP, Endpoints: []shared.EndpointSpec{{Address: l1}}}
		if loadAware {
			s.LoadAware = &shared.LoadAwareSpec{}
		}
		return s
	}
	web := func(backend string) shared.ServiceSpec {
		return shared.ServiceSpec{Name: "web", VIP: webVIP, Endpoints: []shared.EndpointSpec{{Address: backend}}}
	}
	update := func(changed []string, services ...shared.ServiceSpec) source.Update {
		top := &shared.Topology{Services: services}
		return source.Update{Topology: top, Services: source.TopologyServices(top), Changed: changed}
	}
	src := make(scriptSource, 1)
	logs := &syncbuf.Buffer{}
	cg, dir, listen := kerneltest.Cgroup(t), filepath.Join(kerneltest.BPFFS(t), "lt"), kerneltest.FreeAddr(t)
	t.Cleanup(func() { kernel.Uninstall("", dir) })
	runAgent(t, AgentConfig{Source: src, Cgroup: cg, BPFFS: dir, Listen: listen, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	src <- update([]string{"la", "web"}, la(true), web(w1))
	kerneltest.Eventually(t, 10*time.Second, "web installed", answersFrom(webVIP, w1))
	src <- update([]string{"web"}, la(true), web(w2))
	kerneltest.Eventually(t, 5*time.Second, "web's change installed", answersFrom(webVIP, w2))
	if got, err := kerneltest.Ask(laVIP); err == nil {
		t.Fatalf("la's VIP answered by %s: a load_aware service was installed in the kernel", got)
	}
	const want = `msg="service not installed in the kernel; the filters are served it" service=la err="service \"la\": load_aware is not implemented in the kernel yet`
	if n := strings.Count(logs.String(), want); n != 1 {
		t.Fatalf("the refusal logged %d times over two installs, want once:\n%s", n, logs.String())
	}
	if err := gauge(listen, "loctree_kernel_services_refused", 1)(); err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	src <- update([]string{"la"}, la(false), web(w2))
	kerneltest.Eventually(t, 5*time.Second, "la installed without load_aware", answersFrom(laVIP, l1))
	kerneltest.Eventually(t, 5*time.Second, "the refusal gone", gauge(listen, "loctree_kernel_services_refused", 0))
	if !strings.Contains(logs.String(), `msg="service installed in the kernel again" service=la`) {
		t.Fatalf("no return logged:\n%s", logs.String())
	}
}

// gauge says whether the agent at listen exports metric name with value want.
func gauge(listen, name string, want float64) func() error {
	return func() error {
		fams, err := scrape(listen)
		if err != nil {
			return err
		}
		f, ok := fams[name]
		if !ok || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetGauge().GetValue() != want {
			return fmt.Errorf("%s: %v, want %v", name, f, want)
		}
		return nil
	}
}
