package loader

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/loctree/loctree/loader/source"
	"github.com/loctree/loctree/shared"
)

// Issue 26 item 7: a failover region no endpoint has was accepted
// silently. The agent logs each warning of its tree once, however many
// rebuilds keep it, with the nearest known region, and counts them.
func TestAgentLogsWarningsOnce(t *testing.T) {
	var logs bytes.Buffer
	a := &agent{name: "test", log: slog.New(slog.NewTextHandler(&logs, nil)), metrics: newMetrics()}
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
		Failover: []shared.FailoverSpec{{From: "ap-east", To: "us-east"}, {From: "sa-east", To: "us-east"}},
		Endpoints: []shared.EndpointSpec{{Address: "127.0.0.1:80", Locality: shared.Locality{"region": "us-east"}}}}
	if _, err := b.Update([]shared.ServiceSpec{api}, nil, 1); err != nil {
		t.Fatal(err)
	}
	if got := b.Warnings(a.sourceNodes(source.Update{})); len(got) != 0 {
		t.Fatalf("warnings %v, want none: the agent's localities are sources", got)
	}
}
