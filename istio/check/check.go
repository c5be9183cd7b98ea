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
	"strconv"
	"strings"
	"time"
)

// ErrNoFilter means the agent answered but no filter polled it in the window.
var ErrNoFilter = errors.New("no filter polled the agent")

// Report is what Agent found.
type Report struct {
	Agent        string  `json:"agent"`
	Healthy      bool    `json:"healthy"`
	Generation   float64 `json:"generation"`
	Services     float64 `json:"services"`
	Endpoints    float64 `json:"endpoints"`
	Window       string  `json:"window"`
	TreeRequests float64 `json:"treeRequests"` // 200 and 304 answers in the window
	NotReady     float64 `json:"notReady"`     // 503 answers in the window
}

// Agent reads base's /healthz and /metrics, waits for window (longer than
// the filters' refresh_ms, 5 s as shipped), reads /metrics again and counts
// the tree requests answered in between. It returns ErrNoFilter (with the
// report) when there were none.
func Agent(ctx context.Context, c *http.Client, base string, window time.Duration) (*Report, error) {
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
	if _, ok := after[`loctree_tree_requests_total{code="200"}`]; !ok {
		return r, fmt.Errorf("%s/metrics has no loctree_tree_requests_total: an agent older than this check", base)
	}
	if r.TreeRequests+r.NotReady == 0 {
		return r, fmt.Errorf("%w in %s: on a node with meshed pods, their filters do not run (check the WasmPlugin's url and the istio-proxy logs for the module pull; failStrategy FAIL_OPEN replaces a module that cannot be pulled by an allow-all filter)", ErrNoFilter, window)
	}
	return r, nil
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
