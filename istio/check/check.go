// Package check asks one loctree agent whether it is healthy and whether
// the proxy-wasm filters of its node poll it for the tree: the sign that the
// WasmPlugin's module was pulled and runs (with failStrategy FAIL_OPEN, a
// module that cannot be pulled is replaced by an allow-all filter and
// nothing else shows it).
package check

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ErrNoFilter means the agent answered but no filter polled it in the window.
var ErrNoFilter = errors.New("no filter polled the agent")

// ErrNotAgent means the address answered, but not as a loctree agent: its
// /metrics has no loctree_generation.
var ErrNotAgent = errors.New("not a loctree agent")

// Report is what Agent found. Endpoints counts the eligible endpoints the
// agent installed (its loctree_endpoints gauge), the ones traffic can go to.
type Report struct {
	Agent        string  `json:"agent"`
	Healthy      bool    `json:"healthy"`
	Generation   float64 `json:"generation"`
	Services     float64 `json:"services"`
	Endpoints    float64 `json:"eligible_endpoints"`
	Window       string  `json:"window"`
	TreeRequests float64 `json:"tree_requests"` // 200 and 304 answers in the window
	NotReady     float64 `json:"not_ready"`     // 503 answers in the window
}

// AgentURL reads the --agent of `loctree istio check`: an http:// base URL
// or, as kubectl users type it, HOST:PORT (http:// is then assumed). A path
// other than "/", a query or another scheme is an error.
func AgentURL(s string) (string, error) {
	raw := s
	if !strings.Contains(s, "://") {
		raw = "http://" + s
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "", fmt.Errorf("agent %q: %w", s, err)
	case u.Scheme != "http":
		return "", fmt.Errorf("agent %q: want http://HOST:PORT or HOST:PORT (the agent serves plain HTTP)", s)
	case u.Host == "" || u.Hostname() == "":
		return "", fmt.Errorf("agent %q: no host; want HOST:PORT, e.g. 127.0.0.1:15099", s)
	case u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return "", fmt.Errorf("agent %q: want only the agent's address, HOST:PORT, without a path, query or user", s)
	}
	return "http://" + u.Host, nil
}

// Agent reads base's /healthz and /metrics, waits for window (longer than
// the filters' refresh_ms, 5 s as shipped; positive), reads /metrics again
// and counts the tree requests answered in between. wait, if not nil, is
// told before the wait. It returns ErrNoFilter (with the report) when
// there were none, and ErrNotAgent (no report) when base does not answer
// as a loctree agent, or as one too old to count tree requests.
func Agent(ctx context.Context, c *http.Client, base string, window time.Duration, wait func(time.Duration)) (*Report, error) {
	if window <= 0 {
		return nil, fmt.Errorf("window %s: must be positive (longer than the filters' refresh_ms, 5s as shipped)", window)
	}
	base = strings.TrimSuffix(base, "/")
	r := &Report{Agent: base, Window: window.String()}
	code, _, err := get(ctx, c, base+"/healthz")
	if err != nil {
		return nil, err
	}
	r.Healthy = code == http.StatusOK
	before, err := metrics(ctx, c, base)
	if err != nil {
		return nil, err
	}
	if err := checkAgent(base, before); err != nil {
		return nil, err
	}
	if wait != nil {
		wait(window)
	}
	select {
	case <-time.After(window):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	after, err := metrics(ctx, c, base)
	if err != nil {
		return nil, err
	}
	r.Generation, r.Services, r.Endpoints = after["loctree_generation"], after["loctree_services"], after["loctree_endpoints"]
	for _, code := range []string{"200", "304"} {
		k := `loctree_tree_requests_total{code="` + code + `"}`
		r.TreeRequests += after[k] - before[k]
	}
	k := `loctree_tree_requests_total{code="503"}`
	r.NotReady = after[k] - before[k]
	if r.TreeRequests+r.NotReady == 0 {
		return r, fmt.Errorf("%w in %s: on a node with meshed pods, their filters do not run (check the WasmPlugin's url and the istio-proxy logs for the module pull; failStrategy FAIL_OPEN replaces a module that cannot be pulled by an allow-all filter)", ErrNoFilter, window)
	}
	return r, nil
}

// checkAgent fails unless the metrics are a loctree agent's that count
// tree requests.
func checkAgent(base string, m map[string]float64) error {
	if _, ok := m["loctree_generation"]; !ok {
		return fmt.Errorf("%s: %w: its /metrics has no loctree_generation (is --agent the agent's address, port 15099 as shipped?)", base, ErrNotAgent)
	}
	if _, ok := m[`loctree_tree_requests_total{code="200"}`]; !ok {
		return fmt.Errorf("%s: %w this check can read: its /metrics has no loctree_tree_requests_total (an agent older than this check)", base, ErrNotAgent)
	}
	return nil
}

func get(ctx context.Context, c *http.Client, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("agent: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, body, err
}

// metrics reads the agent's Prometheus text into series → value.
func metrics(ctx context.Context, c *http.Client, base string) (map[string]float64, error) {
	code, body, err := get(ctx, c, base+"/metrics")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("%s/metrics: HTTP %d", base, code)
	}
	return parse(string(body)), nil
}

// parse reads "series value" lines of the Prometheus text format.
func parse(text string) map[string]float64 {
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}
