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

// A service with load_aware is served by the kernel through the agent's
// one update path: its VIP is redirected from the first install and after
// an update that drops load_aware, nothing is refused, logged as such or
// counted in loctree_kernel_services_refused.
func TestAgentLoadAwareInKernel(t *testing.T) {
	kerneltest.RequireRoot(t)
	const laVIP, webVIP = "127.77.9.3:80", "127.77.9.4:80"
	const l1, w1 = "127.0.9.5:9009", "127.0.9.6:9009"
	kerneltest.Backends(t, []string{l1, w1})
	la := func(loadAware bool) shared.ServiceSpec {
		s := shared.ServiceSpec{Name: "la", VIP: laVIP, Endpoints: []shared.EndpointSpec{{Address: l1}}}
		if loadAware {
			s.LoadAware = &shared.LoadAwareSpec{}
		}
		return s
	}
	web := shared.ServiceSpec{Name: "web", VIP: webVIP, Endpoints: []shared.EndpointSpec{{Address: w1}}}
	update := func(changed []string, services ...shared.ServiceSpec) source.Update {
		top := &shared.Topology{Services: services}
		return source.Update{Topology: top, Services: source.TopologyServices(top), Changed: changed}
	}
	src := make(scriptSource, 1)
	logs := &syncbuf.Buffer{}
	cg, dir, listen := kerneltest.Cgroup(t), filepath.Join(kerneltest.BPFFS(t), "lt"), kerneltest.FreeAddr(t)
	t.Cleanup(func() { kernel.Uninstall("", dir) })
	runAgent(t, AgentConfig{Source: src, Cgroup: cg, BPFFS: dir, Listen: listen, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	src <- update([]string{"la", "web"}, la(true), web)
	kerneltest.Eventually(t, 10*time.Second, "la installed with load_aware", answersFrom(laVIP, l1))
	kerneltest.Eventually(t, 5*time.Second, "web installed", answersFrom(webVIP, w1))
	if err := gauge(listen, "loctree_kernel_services_refused", 0)(); err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	src <- update([]string{"la"}, la(false), web)
	kerneltest.Eventually(t, 5*time.Second, "la installed without load_aware", answersFrom(laVIP, l1))
	if strings.Contains(logs.String(), "not installed in the kernel") {
		t.Fatalf("a refusal logged:\n%s", logs.String())
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
