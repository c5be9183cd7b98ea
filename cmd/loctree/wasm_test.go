package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loctree/loctree/internal/testing/wasmtest"
	"github.com/loctree/loctree/shared"
)

// compileCache is a wazero compilation cache directory shared by the CLI
// runs of this test binary; TestMain creates and removes it.
var compileCache string

// cacheDir is the --cache-dir the CLI runs of the tests use.
func cacheDir() string { return compileCache }

func headerValue(h [][2]string, key string) string {
	for _, kv := range h {
		if kv[0] == key {
			return kv[1]
		}
	}
	return ""
}

const cliTopology = `{"topology":{"services":[
 {"name":"reviews","endpoints":[
  {"address":"127.0.2.1:9080","locality":{"region":"us-east","zone":"us-east-1a"}},
  {"address":"127.0.2.2:9080","locality":{"region":"us-west","zone":"us-west-2a"}}]},
 {"name":"ratings","mode":"strict","endpoints":[
  {"address":"127.0.3.1:9080","locality":{"region":"us-east","zone":"us-east-1a"}}]}]}}`

func TestWasmRunLoctree(t *testing.T) {
	mod := wasmtest.Build(t, "../../filter")
	code, stdout, stderr := runCLI(t, "wasm", "run", "--cache-dir", cacheDir(), "--module", mod, "--plugin-config", cliTopology,
		"--property", "xds.node.locality.region=us-west", "--property", "xds.node.locality.zone=us-west-2a",
		"--header", ":authority=reviews:9080", "--header", "x-gateway-destination-endpoint=127.99.9.9:1", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out runOutput
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if out.Action != "continue" || headerValue(out.RequestHeaders, "x-gateway-destination-endpoint") != "127.0.2.2:9080" || out.LocalResponse != nil {
		t.Fatalf("unexpected output: %s", stdout)
	}

	code, stdout, _ = runCLI(t, "wasm", "run", "--cache-dir", cacheDir(), "--module", mod, "--plugin-config", cliTopology,
		"--property", "xds.node.locality.region=eu-central", "--header", ":authority=ratings")
	if code != 0 || !strings.Contains(stdout, `"status": 503`) || !strings.Contains(stdout, "strict mode") {
		t.Fatalf("strict miss: exit %d: %s", code, stdout)
	}
}

func TestWasmRunBadConfig(t *testing.T) {
	mod := wasmtest.Build(t, "../../filter")
	code, stdout, stderr := runCLI(t, "wasm", "run", "--cache-dir", cacheDir(), "--module", mod, "--plugin-config", `{"tree":{}}`)
	if code == 0 || !strings.Contains(stderr, "plugin start failed") {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	if !strings.Contains(stdout, `"level": "critical"`) || !strings.Contains(stdout, "tree.cluster: required") {
		t.Fatalf("the plugin's log line is missing: %s", stdout)
	}
}

// TestWasmRunOtherSDK runs a module that loctree did not build: another
// export set (ABI 0.2.0, malloc), gRPC stubbed as UNIMPLEMENTED.
func TestWasmRunOtherSDK(t *testing.T) {
	mod := wasmtest.Build(t, "../../host/testdata/othersdk")
	code, stdout, stderr := runCLI(t, "wasm", "run", "--cache-dir", cacheDir(), "--module", mod, "--header", "x-a=1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out runOutput
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out.Action != "continue" || headerValue(out.RequestHeaders, "x-a") != "1" || headerValue(out.RequestHeaders, "x-grpc-status") != "12" {
		t.Fatalf("unexpected output: %s", stdout)
	}
	var order []string
	for _, l := range out.Logs {
		order = append(order, strings.TrimSpace(l.Message))
	}
	if got := strings.Join(order, ","); !strings.HasSuffix(got, "log 2,done 2,delete 2,done 1,delete 1") {
		t.Fatalf("callback order %s", got)
	}
}

// backend is a real HTTP server on its own 127.0.x.y address that answers
// with that address.
func echoBackend(t *testing.T, ip string) string {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, addr)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return addr
}

// startServe runs `loctree wasm serve` in-process until the test ends and
// returns its URL.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	url, _ := startServeStop(t, args...)
	return url
}

// startServeStop is startServe that also returns stop: it shuts the server
// down and returns what it printed after its first line.
func startServeStop(t *testing.T, args ...string) (url string, stop func() string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	cmd := newRootCmd()
	cmd.SetArgs(append([]string{"wasm", "serve", "--listen", "127.0.0.1:0", "--cache-dir", cacheDir()}, args...))
	cmd.SetOut(pw)
	cmd.SetErr(io.Discard)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx); pw.Close() }()
	var once sync.Once
	stopped := func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}
	t.Cleanup(func() { once.Do(stopped) })
	line := make([]byte, 256)
	n, err := pr.Read(line)
	rest := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(pr)
		rest <- string(b)
	}()
	m := regexp.MustCompile(`http://\S+`).Find(line[:n])
	if err != nil || m == nil {
		t.Fatalf("serve did not start: %v %q", err, line[:n])
	}
	return string(m), func() string {
		once.Do(stopped)
		return <-rest
	}
}

func proxyGet(t *testing.T, url, authority string, hdr ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url+"/x", nil)
	req.Host = authority
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestWasmServe: real backends on 127.0.x.y, two proxies in two
// localities; every request lands where the tree says.
func TestWasmServe(t *testing.T) {
	mod := wasmtest.Build(t, "../../filter")
	east1, east2 := echoBackend(t, "127.0.6.1"), echoBackend(t, "127.0.6.2")
	west, eu := echoBackend(t, "127.0.6.3"), echoBackend(t, "127.0.6.4")
	top := &shared.Topology{Services: []shared.ServiceSpec{
		{Name: "reviews", Endpoints: []shared.EndpointSpec{
			{Address: east1, Locality: shared.Locality{"region": "us-east", "zone": "a"}},
			{Address: east2, Locality: shared.Locality{"region": "us-east", "zone": "a"}},
			{Address: west, Locality: shared.Locality{"region": "us-west", "zone": "b"}},
			{Address: eu, Locality: shared.Locality{"region": "eu", "zone": "c"}}}},
		{Name: "ratings", Mode: "strict", Endpoints: []shared.EndpointSpec{
			{Address: west, Locality: shared.Locality{"region": "us-west", "zone": "b"}}}},
	}}
	tree, err := shared.Build(top, shared.BuildOptions{Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	topJSON, _ := json.Marshal(top)
	for _, src := range []shared.Locality{{"region": "us-east", "zone": "a"}, {"region": "us-west", "zone": "x"}, {"region": "ap"}} {
		loc, _ := json.Marshal(src)
		url := startServe(t, "--module", mod, "--workers", "2", "--plugin-config", fmt.Sprintf(`{"topology":%s,"locality":%s}`, topJSON, loc))
		svc, _ := tree.Service("reviews")
		r := svc.Lookup(src)
		want := map[string]bool{}
		for i := r.Lo; i < r.Hi; i++ {
			want[tree.Endpoint(i).Addr.String()] = true
		}
		for range 30 {
			status, body := proxyGet(t, url, "reviews:9080", "x-gateway-destination-endpoint", "127.0.0.1:1")
			if status != 200 || !want[body] {
				t.Fatalf("from %v: status %d landed on %q, want one of %v", src, status, body, want)
			}
		}
		status, body := proxyGet(t, url, "ratings")
		if strictOK := src["region"] == "us-west" && src["zone"] == "b"; !strictOK && status != 503 {
			t.Fatalf("strict miss from %v: %d %q", src, status, body)
		}
		if status, _ := proxyGet(t, url, "unknown.example"); status != 502 {
			t.Fatalf("unknown service: status %d, want 502 (nothing to forward to)", status)
		}
	}
}

// TestWasmServeFetchesTree: the filter in `wasm serve` fetches the tree
// from an agent over real HTTP on its own timer, then routes by it.
func TestWasmServeFetchesTree(t *testing.T) {
	mod := wasmtest.Build(t, "../../filter")
	near, far := echoBackend(t, "127.0.7.1"), echoBackend(t, "127.0.7.2")
	tree, err := shared.Build(&shared.Topology{Services: []shared.ServiceSpec{{Name: "reviews", Endpoints: []shared.EndpointSpec{
		{Address: near, Locality: shared.Locality{"region": "us-east"}},
		{Address: far, Locality: shared.Locality{"region": "us-west"}}}}}}, shared.BuildOptions{Generation: 7})
	if err != nil {
		t.Fatal(err)
	}
	var fetches atomic.Int64
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		w.Header().Set("ETag", `"7"`)
		if r.Header.Get("If-None-Match") == `"7"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Write(tree.Bytes())
	}))
	defer agent.Close()
	url := startServe(t, "--module", mod, "--workers", "2", "--upstream", "agent="+strings.TrimPrefix(agent.URL, "http://"),
		"--plugin-config", `{"tree":{"cluster":"agent","refresh_ms":1000},"locality":{"region":"us-east"}}`)
	// Every worker's VM has the tree once one fetched it and the others
	// ticked (200 ms until a first tree): wait for a run of good answers.
	deadline, good := time.Now().Add(15*time.Second), 0
	for good < 10 {
		status, body := proxyGet(t, url, "reviews")
		switch {
		case status == 200 && body == near:
			good++
		case status == 502 && time.Now().Before(deadline): // no tree yet in this worker
			good = 0
			time.Sleep(50 * time.Millisecond)
		default:
			t.Fatalf("status %d landed on %q, want %s", status, body, near)
		}
	}
	if fetches.Load() == 0 {
		t.Fatal("the agent was never asked")
	}
}

// TestWasmRunHashKeyMatchesTreePick: the filter sends a consistent_hash key
// where `loctree tree pick --key` says it goes.
func TestWasmRunHashKeyMatchesTreePick(t *testing.T) {
	mod := wasmtest.Build(t, "../../filter")
	topo := `{"services":[{"name":"sticky","policy":"consistent_hash","endpoints":[
	  {"address":"127.0.7.1:80","locality":{"region":"r"}},{"address":"127.0.7.2:80","locality":{"region":"r"}},
	  {"address":"127.0.7.3:80","locality":{"region":"r"},"weight":3},{"address":"127.0.7.4:80","locality":{"region":"r"}}]}]}`
	file := filepath.Join(t.TempDir(), "topology.json")
	if err := os.WriteFile(file, []byte(topo), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"user-1", "user-2", "user-3", "user-4", "user-5", "user-6"} {
		code, out, errs := runCLI(t, "tree", "pick", "-f", file, "--service", "sticky", "--from", "region=r", "--key", key, "-o", "json")
		var want pickResult
		if code != 0 || json.Unmarshal([]byte(out), &want) != nil || len(want.Picks) != 1 {
			t.Fatalf("tree pick: exit %d: %s %s", code, out, errs)
		}
		code, out, errs = runCLI(t, "wasm", "run", "--cache-dir", cacheDir(), "--module", mod,
			"--plugin-config", `{"topology":`+topo+`,"locality":{"region":"r"}}`,
			"--header", ":authority=sticky", "--header", "x-loctree-hash-key="+key, "-o", "json")
		var got runOutput
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
			t.Fatalf("wasm run: exit %d: %s %s", code, out, errs)
		}
		if addr := headerValue(got.RequestHeaders, "x-gateway-destination-endpoint"); want.Picks[addr] != 1 {
			t.Fatalf("key %q: filter picked %q, tree pick %v", key, addr, want.Picks)
		}
	}
}

// TestWasmRunLogLevel: --log-level is the level the plugin sees and drops
// the module's lines below it; a bad level is one clear error.
func TestWasmRunLogLevel(t *testing.T) {
	mod := wasmtest.Build(t, "../../filter")
	code, _, stderr := runCLI(t, "wasm", "run", "--cache-dir", cacheDir(), "--module", mod, "--plugin-config", cliTopology,
		"--log-level", "loud", "--header", ":authority=reviews")
	if code == 0 || !strings.Contains(stderr, `--log-level: log level "loud"`) {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	code, stdout, stderr := runCLI(t, "wasm", "run", "--cache-dir", cacheDir(), "--module", mod, "--plugin-config", `{"tree":{}}`,
		"--log-level", "critical")
	if code == 0 || !strings.Contains(stdout, "tree.cluster: required") {
		t.Fatalf("a critical line must pass --log-level critical: exit %d: %s %s", code, stdout, stderr)
	}
}

// TestWasmRunCountShowsPriorities: `wasm run --count N` sends N requests
// and shows the picks per endpoint and, for a spillover service, per
// priority (the filter's loctree_picks_priority_<p>_total counters); the
// spread follows the loads `tree pick` shows for the same source (70 % on
// P0: one healthy endpoint of two, factor 140).
func TestWasmRunCountShowsPriorities(t *testing.T) {
	mod := wasmtest.Build(t, "../../filter")
	config := `{"topology":{"services":[{"name":"reviews","scopes":["region","zone"],"spillover":{},"endpoints":[
  {"address":"127.0.2.1:9080","locality":{"region":"us-east","zone":"a"}},
  {"address":"127.0.2.2:9080","locality":{"region":"us-east","zone":"a"},"healthy":false},
  {"address":"127.0.2.3:9080","locality":{"region":"us-east","zone":"b"}}]}]},
 "locality":{"region":"us-east","zone":"a"}}`
	code, stdout, stderr := runCLI(t, "wasm", "run", "--cache-dir", cacheDir(), "--module", mod, "--plugin-config", config,
		"--header", ":authority=reviews", "--count", "2000")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out runOutput
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if len(out.Priorities) != 2 || out.Priorities[0].Priority != 0 || out.Priorities[0].Picks+out.Priorities[1].Picks != 2000 {
		t.Fatalf("priorities %+v, want P0 and P1 with 2000 picks", out.Priorities)
	}
	if n := out.Priorities[0].Picks; n < 1300 || n > 1500 || out.Picks["127.0.2.1:9080"] != n || out.Picks["127.0.2.2:9080"] != 0 {
		t.Fatalf("P0 %d picks, picks %v: want about 70 %% on 127.0.2.1:9080 and none on the unhealthy one", n, out.Picks)
	}
}

// TestWasmServePrintsPriorities: wasm serve runs the filter's priority load
// for a spillover service and prints its picks per priority on shutdown:
// about 70 % on P0 (one healthy endpoint of two, factor 140), as tree pick
// shows.
func TestWasmServePrintsPriorities(t *testing.T) {
	mod := wasmtest.Build(t, "../../filter")
	a, b := echoBackend(t, "127.0.8.1"), echoBackend(t, "127.0.8.3")
	config := fmt.Sprintf(`{"topology":{"services":[{"name":"reviews","scopes":["region","zone"],"spillover":{},"endpoints":[
  {"address":%q,"locality":{"region":"us-east","zone":"a"}},
  {"address":"127.0.8.2:9","locality":{"region":"us-east","zone":"a"},"healthy":false},
  {"address":%q,"locality":{"region":"us-east","zone":"b"}}]}]},
 "locality":{"region":"us-east","zone":"a"}}`, a, b)
	url, stop := startServeStop(t, "--module", mod, "--workers", "1", "--plugin-config", config)
	for range 400 {
		if status, body := proxyGet(t, url, "reviews"); status != 200 || (body != a && body != b) {
			t.Fatalf("status %d from %q", status, body)
		}
	}
	out := stop()
	m := regexp.MustCompile(`picks by priority: P0 (\d+) \(\S+\), P1 (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no per-priority line in %q", out)
	}
	if p0, _ := strconv.Atoi(m[1]); p0 < 230 || p0 > 330 {
		t.Fatalf("P0 %d of 400 picks, want about 70 %%: %q", p0, out)
	}
}
