package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/internal/topology"
	"github.com/loctree/loctree/loader"
	"github.com/loctree/loctree/shared"
)

// source is one client locality, asked of both data planes.
type source struct {
	name string
	loc  shared.Locality
	// cgroup is the cgroup (below the attach cgroup) whose connects carry
	// loc via --cgroup-locality; "" means the node's own --locality.
	cgroup string
	// props gives the filter its locality as xds.node.locality.*
	// properties; otherwise as the plugin configuration's "locality".
	props bool
}

var sources = []source{
	{name: "node", loc: shared.Locality{"region": "us-east", "zone": "us-east-1a", "subzone": "rack-1"}},
	{name: "west", loc: shared.Locality{"region": "us-west", "zone": "us-west-2a", "subzone": "rack-1"}, cgroup: "west", props: true},
	{name: "east-1c", loc: shared.Locality{"region": "us-east", "zone": "us-east-1c"}, cgroup: "east-1c"},
	{name: "mars", loc: shared.Locality{"region": "mars"}, cgroup: "mars", props: true},
}

// service is one service of testdata/mesh-v*.yaml as both planes address it.
type service struct{ name, host, vip string }

var services = []service{
	{"reviews.default.svc.cluster.local", "reviews:9080", "127.77.61.1:9080"},
	{"ratings.default.svc.cluster.local", "ratings:9080", "127.77.61.2:9080"},
}

// canary's one endpoint's address names the generation (v1, v2+); details
// has no VIP and moves in v3 and v4. Requests to them tell which tree the
// data plane that answered holds.
var (
	canary  = service{"canary.default.svc.cluster.local", "canary:9080", "127.77.61.3:9080"}
	details = service{"details.default.svc.cluster.local", "details:9080", ""}
)

// Every endpoint address of both generations.
var endpoints = []string{
	"127.0.61.1:9080", "127.0.61.3:9080", "127.0.61.4:9080", "127.0.61.5:9080", "127.0.61.6:9080", "127.0.61.7:9080",
	"127.0.62.1:9080", "127.0.62.2:9080", "127.0.62.3:9080", "127.0.62.4:9080",
	"127.0.63.1:9080", "127.0.63.2:9080",
	"127.0.64.1:9080", "127.0.64.2:9080", "127.0.64.3:9080",
}

// TestKernelAndFilterAgree runs the real agent and one real `loctree wasm
// serve` per source locality on the same topology file. For every source
// and service, kernel-redirected connections to the VIP and requests
// through the proxy (whose filter fetched the tree from the agent over
// HTTP) land only on, and on every one of, the candidates package shared
// computes for that source; where there is none (strict mode) both refuse.
// Then the topology file changes and both planes follow the new generation;
// then the agent is killed and restarted on its pins, and the filters
// follow the tree it serves; last, after an uninstall, they follow a fresh
// agent's generation 1.
func TestKernelAndFilterAgree(t *testing.T) {
	kerneltest.RequireRoot(t)
	cg := kerneltest.Cgroup(t)
	fs := filepath.Join(kerneltest.BPFFS(t), "loctree")
	cli, wasm := build(t)
	backends(t, endpoints)
	makeCgroups(t, cg)
	topo := filepath.Join(t.TempDir(), "mesh.yaml")
	install(t, topo, "testdata/mesh-v1.yaml")
	t.Cleanup(func() { run(t, cli, "agent", "uninstall", "--cgroup", cg, "--bpffs", fs) })

	listen := kerneltest.FreeAddr(t)
	agent := start(t, cli, "agent", agentArgs(topo, cg, fs, listen)...)
	kerneltest.Eventually(t, 15*time.Second, "agent healthz", func() error { return httpOK("http://"+listen+"/healthz", "") })
	proxies := startProxies(t, cli, wasm, listen)
	planes := &planes{t: t, cg: cg, proxies: proxies}

	tree := servedTree(t, listen, "testdata/mesh-v1.yaml", 1)
	planes.waitFilters(canary, "127.0.63.1:9080")
	planes.agree(tree)

	install(t, topo, "testdata/mesh-v2.yaml")
	kerneltest.Eventually(t, 15*time.Second, "agent reloads the topology", func() error { return etagIs(listen, `"2"`) })
	tree = servedTree(t, listen, "testdata/mesh-v2.yaml", 2)
	// The agent serves a tree only after installing it into the maps, so
	// the kernel follows at once; the filters after their refresh tick.
	planes.kernelCanary("127.0.63.2:9080")
	planes.waitFilters(canary, "127.0.63.2:9080")
	planes.agree(tree)

	agent = restart(t, planes, agent, cli, topo, listen, agentArgs(topo, cg, fs, listen))
	tree = servedTree(t, listen, "testdata/mesh-v4.yaml", 4)
	planes.waitFilters(details, "127.0.64.3:9080")
	planes.agree(tree)

	planes.checkKernelCounters(listen, 4)
	if err := agent.stop(); err != nil {
		t.Fatalf("agent after SIGTERM: %v", err)
	}
	run(t, cli, "agent", "uninstall", "--cgroup", cg, "--bpffs", fs)
	if _, err := dialVIP(canary.vip); !errors.Is(err, errRefused) {
		t.Fatalf("after uninstall a VIP must not be redirected: %v", err)
	}

	// A fresh agent numbers its trees from 1 again; the filters, holding
	// generation 4, must all follow it (the agent is the truth).
	install(t, topo, "testdata/mesh-v1.yaml")
	start(t, cli, "agent (fresh)", agentArgs(topo, cg, fs, listen)...)
	kerneltest.Eventually(t, 15*time.Second, "fresh agent serves generation 1", func() error { return etagIs(listen, `"1"`) })
	planes.kernelCanary("127.0.63.1:9080")
	planes.waitFilters(canary, "127.0.63.1:9080")
}

// restart applies v3, a change only to details, which has no VIP and so
// writes nothing in the kernel maps; kills the agent (kill -9); installs v4
// while it is down (the kernel path keeps working); and starts it again on
// the same pins. The restarted agent must serve v4 as generation 4: under
// generation 3 the filters, which ask with If-None-Match "3", would keep
// details on its v3 address.
func restart(t *testing.T, planes *planes, agent *process, cli, topo, listen string, args []string) *process {
	t.Helper()
	install(t, topo, "testdata/mesh-v3.yaml")
	kerneltest.Eventually(t, 15*time.Second, "agent applies v3", func() error { return etagIs(listen, `"3"`) })
	servedTree(t, listen, "testdata/mesh-v3.yaml", 3)
	planes.waitFilters(details, "127.0.64.2:9080")
	agent.kill()
	install(t, topo, "testdata/mesh-v4.yaml")
	planes.kernelCanary("127.0.63.2:9080")
	agent = start(t, cli, "agent (restarted)", args...)
	kerneltest.Eventually(t, 15*time.Second, "restarted agent serves v4 as generation 4", func() error { return etagIs(listen, `"4"`) })
	if !strings.Contains(agent.out.String(), "re-adopted pinned services") {
		t.Fatalf("the restarted agent did not re-adopt the pinned maps:\n%s", agent.out.String())
	}
	return agent
}

func agentArgs(topo, cg, fs, listen string) []string {
	args := []string{"agent", "-f", topo, "--cgroup", cg, "--bpffs", fs, "--listen", listen, "--watch-interval", "50ms"}
	for _, s := range sources {
		if s.cgroup == "" {
			args = append(args, "--locality", flagLocality(s.loc))
		} else {
			args = append(args, "--cgroup-locality", filepath.Join(cg, s.cgroup)+":"+flagLocality(s.loc))
		}
	}
	return args
}

func flagLocality(loc shared.Locality) string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(loc)) {
		kv = append(kv, k+"="+loc[k])
	}
	return strings.Join(kv, ",")
}

// startProxies starts one `loctree wasm serve` per source, its filter
// fetching the tree from the agent through the named upstream "agent".
func startProxies(t *testing.T, cli, wasm, agentAddr string) map[string]string {
	t.Helper()
	cache := t.TempDir()
	proxies := map[string]string{}
	for _, s := range sources {
		addr := kerneltest.FreeAddr(t)
		args := []string{"wasm", "serve", "--module", wasm, "--cache-dir", cache, "--listen", addr,
			"--workers", "2", "--upstream", "outbound|15099||loctree-agent=" + agentAddr}
		cfg := map[string]any{"tree": map[string]any{"cluster": "outbound|15099||loctree-agent", "refresh_ms": 100}}
		if s.props {
			for k, v := range s.loc {
				args = append(args, "--property", "xds.node.locality."+nodeLocalityField(k)+"="+v)
			}
		} else {
			cfg["locality"], cfg["fallbacks"] = s.loc, 2
		}
		js, _ := json.Marshal(cfg)
		start(t, cli, "wasm serve ("+s.name+")", append(args, "--plugin-config", string(js))...)
		proxies[s.name] = "http://" + addr
	}
	return proxies
}

// nodeLocalityField is the field of Envoy's node locality for a scope.
func nodeLocalityField(scope string) string {
	if scope == "subzone" {
		return "sub_zone"
	}
	return scope
}

// run runs the CLI to completion and fails the test if it fails.
func run(t *testing.T, cli string, args ...string) {
	t.Helper()
	p := start(t, cli, strings.Join(args[:2], " "), args...)
	if err := <-p.done; err != nil {
		p.done <- err
		t.Fatalf("loctree %s: %v\n%s", strings.Join(args, " "), err, p.out.String())
	}
	p.done <- nil
}

// makeCgroups creates the sources' cgroups below cg; on cleanup the test
// process moves back to cg and they are removed.
func makeCgroups(t *testing.T, cg string) {
	t.Helper()
	for _, s := range sources {
		if s.cgroup != "" {
			childCgroup(t, cg, s.cgroup)
		}
	}
}

// install replaces the topology file with src atomically (as an editor or
// a ConfigMap update would).
func install(t *testing.T, topo, src string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(topo+".tmp", data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(topo+".tmp", topo); err != nil {
		t.Fatal(err)
	}
}

func httpOK(url, host string) error {
	resp, body, err := get(url, host)
	if err == nil && resp.StatusCode != 200 {
		err = fmt.Errorf("%s: %d %s", url, resp.StatusCode, body)
	}
	return err
}

// etagIs checks that the agent serves generation gen: its ETag is
// "GEN-CHECKSUM" (loader.ETag).
func etagIs(agent, gen string) error {
	resp, _, err := get("http://"+agent+"/v1/tree", "")
	if err == nil && !strings.HasPrefix(resp.Header.Get("ETag"), strings.TrimSuffix(gen, `"`)+"-") {
		err = fmt.Errorf("/v1/tree ETag %s, want generation %s", resp.Header.Get("ETag"), gen)
	}
	return err
}

// servedTree checks that the agent serves, byte for byte, the tree that
// shared.Build makes of the topology file src as generation gen, and
// returns it.
func servedTree(t *testing.T, agent, src string, gen uint64) *shared.Tree {
	t.Helper()
	top, err := topology.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	want, err := shared.Build(top, shared.BuildOptions{Generation: gen})
	if err != nil {
		t.Fatal(err)
	}
	resp, body, err := get("http://"+agent+"/v1/tree", "")
	if err != nil {
		t.Fatal(err)
	}
	if tag := loader.ETag(want); resp.StatusCode != 200 || resp.Header.Get("ETag") != tag {
		t.Fatalf("/v1/tree: %d, ETag %s, want 200 and %s", resp.StatusCode, resp.Header.Get("ETag"), tag)
	}
	if body != string(want.Bytes()) {
		t.Fatalf("the agent serves a %d-byte tree that differs from shared.Build of %s (%d bytes)", len(body), src, len(want.Bytes()))
	}
	return want
}

// candidates are the addresses of the candidate set shared computes.
func candidates(t *testing.T, tree *shared.Tree, name string, loc shared.Locality) []string {
	t.Helper()
	svc, ok := tree.Service(name)
	if !ok {
		t.Fatalf("service %s not in the tree", name)
	}
	var out []string
	r := svc.Lookup(loc)
	for i := r.Lo; i < r.Hi; i++ {
		out = append(out, tree.Endpoint(i).Addr.String())
	}
	return out
}
