package loader

import (
	"bytes"
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

// Issue 26 item 7: a failover region no endpoint has was accepted
// silently. The agent logs each warning of its tree once, however many
// rebuilds keep it, with the nearest known region, and counts them.
func TestAgentLogsWarningsOnce(t *testing.T) {
	var logs bytes.Buffer
	a := &agent{name: "test", log: slog.New(slog.NewTextHandler(&logs, nil)), metrics: newMetrics("")}
	api := shared.ServiceSpec{Name: "api", Spillover: &shared.SpilloverSpec{},
		Failover: []shared.FailoverSpec{{From: "us-east", To: "ap-soth"}},
		Endpoints: []shared.EndpointSpec{
			{Address: "127.0.0.1:80", Locality: shared.Locality{"region": "us-east"}},
			{Address: "127.0.0.2:80", Locality: shared.Locality{"region": "ap-south"}}}}
	web := shared.ServiceSpec{Name: "web", Endpoints: []shared.EndpointSpec{{Address: "127.0.0.3:80"}}}
	for gen, upserts := range [][]shared.ServiceSpec{{api}, {web}, {web}} { // three rebuilds keep the warning
		if _, err := a.builder.Update(upserts, nil, uint64(gen+1)); err != nil {
			t.Fatal(err)
		}
		a.noteWarnings(nil)
	}
	const want = `warning="service \"api\": failover[0].to \"ap-soth\": no endpoint of the service is in this region, so the rule sends no traffic there; did you mean \"ap-south\"?"`
	if n := strings.Count(logs.String(), want); n != 1 {
		t.Errorf("warning logged %d times, want once:\n%s", n, logs.String())
	}
	var metrics bytes.Buffer
	a.metrics.WriteTo(&metrics)
	if !strings.Contains(metrics.String(), "\nloctree_topology_warnings 1\n") {
		t.Errorf("metrics lack loctree_topology_warnings 1:\n%s", metrics.String())
	}
}

// The agent's own localities (--locality, its cgroups') are where sources
// are: a failover from region only they are in is no warning.
func TestAgentSourceNodes(t *testing.T) {
	a := &agent{cfg: AgentConfig{Locality: shared.Locality{"region": "ap-east"},
		CgroupLocality: map[string]shared.Locality{"pods": {"region": "sa-east"}}}}
	var b shared.Builder
	api := shared.ServiceSpec{Name: "api", Spillover: &shared.SpilloverSpec{},
		Failover:  []shared.FailoverSpec{{From: "ap-east", To: "us-east"}, {From: "sa-east", To: "us-east"}},
		Endpoints: []shared.EndpointSpec{{Address: "127.0.0.1:80", Locality: shared.Locality{"region": "us-east"}}}}
	if _, err := b.Update([]shared.ServiceSpec{api}, nil, 1); err != nil {
		t.Fatal(err)
	}
	if got := b.Warnings(a.sourceNodes(source.Update{})); len(got) != 0 {
		t.Fatalf("warnings %v, want none: the agent's localities are sources", got)
	}
}

// Through the agent's one update path: a warning of a rule is logged once
// while later updates (of another service) keep it.
func TestAgentWarnsOnceThroughUpdates(t *testing.T) {
	kerneltest.RequireRoot(t)
	const apiVIP, webVIP = "127.77.9.1:80", "127.77.9.2:80"
	const a1, a2, w1, w2 = "127.0.9.1:9009", "127.0.9.4:9009", "127.0.9.2:9009", "127.0.9.3:9009"
	kerneltest.Backends(t, []string{a1, a2, w1, w2})
	api := shared.ServiceSpec{Name: "api", VIP: apiVIP, Spillover: &shared.SpilloverSpec{},
		Failover: []shared.FailoverSpec{{From: "us-east", To: "ap-soth"}},
		Endpoints: []shared.EndpointSpec{{Address: a1, Locality: shared.Locality{"region": "us-east"}},
			{Address: a2, Locality: shared.Locality{"region": "ap-south"}}}}
	web := func(backend string) shared.ServiceSpec {
		return shared.ServiceSpec{Name: "web", VIP: webVIP, Endpoints: []shared.EndpointSpec{{Address: backend, Locality: shared.Locality{"region": "ap-south"}}}}
	}
	update := func(changed []string, services ...shared.ServiceSpec) source.Update {
		top := &shared.Topology{Services: services}
		return source.Update{Topology: top, Services: source.TopologyServices(top), Changed: changed}
	}
	src := make(scriptSource, 1)
	logs := &syncbuf.Buffer{}
	cg, dir := kerneltest.Cgroup(t), filepath.Join(kerneltest.BPFFS(t), "lt")
	t.Cleanup(func() { kernel.Uninstall("", dir) }) // after the agent stops: cleanups run last first
	runAgent(t, AgentConfig{Source: src, Cgroup: cg, BPFFS: dir, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	src <- update([]string{"api", "web"}, api, web(w1))
	kerneltest.Eventually(t, 10*time.Second, "web installed", answersFrom(webVIP, w1))
	src <- update([]string{"web"}, api, web(w2))
	kerneltest.Eventually(t, 5*time.Second, "web's change installed", answersFrom(webVIP, w2))
	const want = `failover[0].to \"ap-soth\": no endpoint of the service is in this region, so the rule sends no traffic there; did you mean \"ap-south\"?`
	if n := strings.Count(logs.String(), want); n != 1 {
		t.Fatalf("the warning logged %d times over two installs, want once:\n%s", n, logs.String())
	}
}

func answersFrom(vip, want string) func() error {
	return func() error {
		if got, err := kerneltest.Ask(vip); got != want || err != nil {
			return fmt.Errorf("%s answered by %q (%v), want %s", vip, got, err, want)
		}
		return nil
	}
}
