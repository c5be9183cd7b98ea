package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/loctree/loctree/internal/testing/wasmtest"
)

// Issue 20, section 2: an unknown subcommand of a parent command exits
// non-zero with cobra's "did you mean", as kubectl does; the parent alone
// still prints its help and exits 0.
func TestUnknownSubcommand(t *testing.T) {
	for _, c := range []struct {
		args       []string
		suggestion string
	}{
		{[]string{"tree", "pik"}, "pick"},
		{[]string{"istio", "foo"}, ""},
		{[]string{"istio", "rendr"}, "render"},
		{[]string{"wasm", "foo"}, ""},
		{[]string{"wasm", "serv"}, "serve"},
		{[]string{"agent", "uninstal"}, "uninstall"},
		{[]string{"nope"}, ""},
	} {
		code, out, errs := runCLI(t, c.args...)
		if code == 0 || !strings.Contains(errs, fmt.Sprintf("unknown command %q", c.args[len(c.args)-1])) {
			t.Errorf("%v: exit %d, stderr %q, stdout %q", c.args, code, errs, out)
		}
		if c.suggestion != "" && !strings.Contains(errs, "Did you mean this?\n\t"+c.suggestion) {
			t.Errorf("%v: stderr %q lacks the suggestion %s", c.args, errs, c.suggestion)
		}
	}
	for _, parent := range []string{"tree", "istio", "wasm"} {
		if code, out, _ := runCLI(t, parent); code != 0 || !strings.Contains(out, "Available Commands:") {
			t.Errorf("%s alone: exit %d, stdout %q", parent, code, out)
		}
	}
}

// Issue 20, section 2: -o yaml wherever -o json exists, with the same keys.
func TestOutputYAML(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"version"},
		{"tree", "build", "--out", filepath.Join(dir, "t.bin")},
		{"tree", "inspect"},
		{"tree", "validate"},
		{"tree", "pick", "--service", "reviews", "--from", "region=us-east"},
		{"wasm", "run", "--cache-dir", cacheDir(), "--module", wasmModule(t), "--plugin-config", cliTopology, "--header", ":authority=reviews"},
	} {
		code, js, errs := runCLI(t, append(args, "-o", "json")...)
		if code != 0 {
			t.Errorf("%v -o json: exit %d: %s", args, code, errs)
			continue
		}
		code, ys, errs := runCLI(t, append(args, "-o", "yaml")...)
		if code != 0 {
			t.Errorf("%v -o yaml: exit %d: %s", args, code, errs)
			continue
		}
		var fromJSON, fromYAML map[string]any
		if err := json.Unmarshal([]byte(js), &fromJSON); err != nil {
			t.Errorf("%v: json: %v", args, err)
		}
		if err := yaml.Unmarshal([]byte(ys), &fromYAML); err != nil {
			t.Errorf("%v: yaml: %v\n%s", args, err, ys)
		}
		for k := range fromJSON {
			if _, ok := fromYAML[k]; !ok {
				t.Errorf("%v: -o yaml lacks the key %q of -o json:\n%s", args, k, ys)
			}
		}
	}
}

// wasmModule is the loctree filter module the wasm tests build.
func wasmModule(t *testing.T) string {
	t.Helper()
	return wasmtest.Build(t, "../../filter")
}

// Issue 20, section 2: one JSON key style, snake_case, in every command;
// istio check used camelCase (treeRequests, notReady).
func TestIstioCheckSnakeCase(t *testing.T) {
	srv := standInAgent(t, 2)
	code, out, errs := runCLI(t, "istio", "check", "--agent", srv.URL, "--window", "10ms", "-o", "json")
	if code != 0 || !strings.Contains(out, `"tree_requests": 2`) || !strings.Contains(out, `"not_ready": 0`) || strings.Contains(out, "treeRequests") {
		t.Errorf("exit %d, out %s, err %s", code, out, errs)
	}
}

// standInAgent is an agent on 127.0.0.1 whose tree requests grow by step
// per /metrics read.
func standInAgent(t *testing.T, step int) *httptest.Server {
	var polls int
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		polls += step
		fmt.Fprintf(w, "loctree_generation 3\nloctree_services 2\nloctree_endpoints 5\nloctree_tree_requests_total{code=\"200\"} %d\nloctree_tree_requests_total{code=\"503\"} 0\n", polls)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// Issue 20, section 2: istio check takes host:port as kubectl-style users
// type it, and says what it waits for.
func TestIstioCheckHostPort(t *testing.T) {
	srv := standInAgent(t, 1)
	hostport := strings.TrimPrefix(srv.URL, "http://")
	code, out, errs := runCLI(t, "istio", "check", "--agent", hostport, "--window", "10ms")
	if code != 0 || !strings.Contains(out, "agent "+srv.URL) {
		t.Errorf("--agent %s: exit %d, out %q, err %q", hostport, code, out, errs)
	}
	if !strings.Contains(errs, "counting the filters' tree requests for 10ms") {
		t.Errorf("stderr %q does not say what it waits for", errs)
	}
	for _, bad := range []string{"ftp://127.0.0.1:1", "http://", "127.0.0.1:1/x?y"} {
		if code, _, errs := runCLI(t, "istio", "check", "--agent", bad, "--window", "1ms"); code != 1 || !strings.Contains(errs, "--agent") {
			t.Errorf("--agent %s: exit %d, stderr %q", bad, code, errs)
		}
	}
}

// Issue 20, section 2: completion of -o and --steering values.
func TestCompleteOutputAndSteering(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"tree", "inspect", "-o", ""}, []string{"table\n", "json\n", "yaml\n"}},
		{[]string{"tree", "build", "-o", "j"}, []string{"json\n"}},
		{[]string{"istio", "check", "-o", ""}, []string{"table\n", "json\n", "yaml\n"}},
		{[]string{"istio", "render", "-o", ""}, []string{"yaml\n", "json\n"}},
		{[]string{"istio", "render", "--steering", ""}, []string{"override-host\n", "persistent-session\n"}},
		{[]string{"wasm", "run", "-o", ""}, []string{"json\n", "yaml\n"}},
	} {
		code, out, errs := runCLI(t, append([]string{"__complete"}, c.args...)...)
		if code != 0 {
			t.Errorf("%v: exit %d: %s", c.args, code, errs)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: completions lack %q:\n%s", c.args, w, out)
			}
		}
	}
}

// Issue 20, section 2: tree inspect -f like pick and build; build and
// validate read a directory as agent -f DIR does.
func TestTreeReadsWhatTheAgentReads(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "services:\n- name: a\n  endpoints:\n  - {address: 127.0.0.1:1, locality: {region: r1}}\n")
	write("b.json", `{"services": [{"name": "b", "endpoints": [{"address": "127.0.0.1:2"}, {"address": "127.0.0.1:3"}]}]}`)
	write("notes.txt", "not a topology")
	code, out, errs := runCLI(t, "tree", "validate", "-f", dir)
	if code != 0 || !strings.Contains(out, "2 services, 3 endpoints") {
		t.Errorf("validate -f DIR: exit %d, out %q, err %q", code, out, errs)
	}
	bin := filepath.Join(t.TempDir(), "t.bin")
	if code, out, errs := runCLI(t, "tree", "build", "-f", dir, "--out", bin); code != 0 || !strings.Contains(out, "2 services, 3 endpoints") {
		t.Errorf("build -f DIR: exit %d, out %q, err %q", code, out, errs)
	}
	for _, args := range [][]string{{"tree", "inspect", "-f", bin}, {"tree", "inspect", "-f", dir}, {"tree", "inspect", bin}} {
		if code, out, errs := runCLI(t, args...); code != 0 || !strings.Contains(out, "2 services, 3 endpoints") {
			t.Errorf("%v: exit %d, out %q, err %q", args, code, out, errs)
		}
	}
	if code, _, errs := runCLI(t, "tree", "inspect", "-f", bin, bin); code != 1 || !strings.Contains(errs, "-f") {
		t.Errorf("inspect -f and an argument: exit %d, err %q", code, errs)
	}
	write("c.yaml", "services:\n- name: c\n  polcy: random\n  endpoints: [{address: 127.0.0.1:4}]\n")
	if code, _, errs := runCLI(t, "tree", "validate", "-f", dir); code != 1 || !strings.Contains(errs, "c.yaml") || !strings.Contains(errs, "line 3") {
		t.Errorf("validate -f DIR with a bad file: exit %d, err %q", code, errs)
	}
}

// Issue 20, section 2: a --from value with '=' in it is two pairs without
// their comma: refused, not read as region "us-east zone=us-east-1a".
func TestFromValueWithEquals(t *testing.T) {
	code, _, errs := runCLI(t, "tree", "pick", "--service", "reviews", "--from", "region=us-east zone=us-east-1a")
	if code != 1 || !strings.Contains(errs, `"us-east zone=us-east-1a"`) || !strings.Contains(errs, "comma") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
}

// Issue 20, section 2: the message of a missing tree file (the
// filesystem names are loader/kernel's TestFilesystemNames).
func TestReadTreeAndFilesystemNames(t *testing.T) {
	code, _, errs := runCLI(t, "tree", "inspect", "nope.bin")
	if code != 1 || !strings.Contains(errs, "read tree") || strings.Contains(errs, "topology") {
		t.Errorf("inspect nope.bin: exit %d, stderr %q", code, errs)
	}
	code, _, errs = runCLI(t, "tree", "inspect", "nope.yaml")
	if code != 1 || !strings.Contains(errs, "read topology") {
		t.Errorf("inspect nope.yaml: exit %d, stderr %q", code, errs)
	}
}

// Issue 20, section 2: the endpoint counts say which is which: total and
// eligible.
func TestEndpointCountsLabelled(t *testing.T) {
	code, out, _ := runCLI(t, "tree", "inspect")
	first, _, _ := strings.Cut(out, "\n")
	if code != 0 || !strings.Contains(first, " endpoints (") || !strings.Contains(first, " eligible)") {
		t.Errorf("inspect header %q: want total and eligible endpoints", first)
	}
	srv := standInAgent(t, 1)
	code, out, _ = runCLI(t, "istio", "check", "--agent", srv.URL, "--window", "1ms")
	if code != 0 || !strings.Contains(out, "eligible_endpoints=5") {
		t.Errorf("istio check: exit %d, out %q", code, out)
	}
}
