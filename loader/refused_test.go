package loader

import (
	"context"
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

// scriptSource publishes the updates sent on its channel.
type scriptSource chan source.Update

func (s scriptSource) Run(ctx context.Context, publish func(source.Update) error) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case u := <-s:
			publish(u)
		}
	}
}

// TestSourceServiceRefusedAlone: a source's service the tree refuses (here
// strict mode with a DestinationRule's spillover) neither stops the agent
// from starting nor holds back the other services' changes; it keeps its
// last installed version, is logged, and is installed once it is fixed.
// Before, one such service rejected every update whole, and at start the
// agent exited.
func TestSourceServiceRefusedAlone(t *testing.T) {
	kerneltest.RequireRoot(t)
	const goodVIP, badVIP, newVIP = "127.77.8.1:80", "127.77.8.2:80", "127.77.8.3:80"
	const x1, x2, y1, y2, z1 = "127.0.8.1:9008", "127.0.8.2:9008", "127.0.8.3:9008", "127.0.8.4:9008", "127.0.8.5:9008"
	kerneltest.Backends(t, []string{x1, x2, y1, y2, z1})
	svc := func(name, vip, backend string, broken bool) shared.ServiceSpec {
		s := shared.ServiceSpec{Name: name, VIP: vip, Endpoints: []shared.EndpointSpec{{Address: backend}}}
		if broken {
			s.Mode, s.Spillover = "strict", &shared.SpilloverSpec{}
		}
		return s
	}
	update := func(changed []string, services ...shared.ServiceSpec) source.Update {
		top := &shared.Topology{Services: services}
		return source.Update{Topology: top, Services: source.TopologyServices(top), Changed: changed}
	}
	src := make(scriptSource, 1)
	logs := &syncbuf.Buffer{}
	cg, dir := kerneltest.Cgroup(t), filepath.Join(kerneltest.BPFFS(t), "lt")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, AgentConfig{Source: src, Cgroup: cg, BPFFS: dir, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
		kernel.Uninstall("", dir)
	})
	answers := func(vip, want string) func() error {
		return func() error {
			if got, err := kerneltest.Ask(vip); got != want || err != nil {
				return fmt.Errorf("%s answered by %q (%v), want %s", vip, got, err, want)
			}
			return nil
		}
	}
	refusedBad := func() error {
		if !strings.Contains(logs.String(), `msg="service refused by the tree; the others are applied" service=bad`) {
			return fmt.Errorf("no refusal of bad logged:\n%s", logs.String())
		}
		return nil
	}

	// Start with one refused service: the agent starts with the other.
	src <- update([]string{"bad", "good"}, svc("bad", badVIP, y1, true), svc("good", goodVIP, x1, false))
	kerneltest.Eventually(t, 10*time.Second, "good installed at start", answers(goodVIP, x1))
	kerneltest.Eventually(t, time.Second, "the refusal logged", refusedBad)

	// Fixed: installed.
	src <- update([]string{"bad"}, svc("bad", badVIP, y1, false), svc("good", goodVIP, x1, false))
	kerneltest.Eventually(t, 5*time.Second, "bad installed once fixed", answers(badVIP, y1))

	// Broken again while good changes and a service is added: both apply,
	// bad keeps its last installed version.
	src <- update([]string{"bad", "good", "new"}, svc("bad", badVIP, y2, true), svc("good", goodVIP, x2, false), svc("new", newVIP, z1, false))
	kerneltest.Eventually(t, 5*time.Second, "good's change applied beside a refused service", answers(goodVIP, x2))
	kerneltest.Eventually(t, time.Second, "new added beside a refused service", answers(newVIP, z1))
	if err := answers(badVIP, y1)(); err != nil {
		t.Fatalf("the refused service lost its last installed version: %v", err)
	}

	// An update that names only good: bad is tried again, and once fixed,
	// installed, though its own change came earlier.
	src <- update([]string{"good"}, svc("bad", badVIP, y2, false), svc("good", goodVIP, x1, false), svc("new", newVIP, z1, false))
	kerneltest.Eventually(t, 5*time.Second, "bad retried with a later update", answers(badVIP, y2))
	kerneltest.Eventually(t, time.Second, "the acceptance logged", func() error { // logged just after the install
		if !strings.Contains(logs.String(), `msg="service accepted again" service=bad`) {
			return fmt.Errorf("no acceptance logged:\n%s", logs.String())
		}
		return nil
	})
}
