package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// Sampling bounds per source, service and data plane: at least minSamples
// answers, then on until every candidate was seen (at most maxSamples).
const (
	minSamples = 16
	maxSamples = 200
	refusals   = 4 // answers checked where there is no candidate
)

// planes asks both data planes on behalf of the sources.
type planes struct {
	t       *testing.T
	cg      string            // the cgroup the agent attached to
	proxies map[string]string // source name → URL of its `wasm serve`
	// Kernel outcomes, compared with the agent's counters.
	redirected, refused int
}

// agree checks every source and service on both planes against tree.
func (p *planes) agree(tree *shared.Tree) {
	for _, s := range sources {
		for _, svc := range services {
			want := candidates(p.t, tree, svc.name, s.loc)
			p.inCgroup(s, func() {
				p.sample("kernel", s, svc, want, 1, func() ([]string, error) { return p.dial(svc.vip) })
			})
			header := 1
			if !s.props {
				header = min(3, len(want)) // the pick and "fallbacks": 2
			}
			p.sample("filter", s, svc, want, header, func() ([]string, error) { return ask(p.proxies[s.name], svc.host) })
		}
	}
}

// inCgroup runs f with the test process in the source's cgroup, so its
// connects carry that source's locality.
func (p *planes) inCgroup(s source, f func()) {
	if s.cgroup != "" {
		kerneltest.MoveTo(p.t, filepath.Join(p.cg, s.cgroup))
		defer kerneltest.MoveTo(p.t, p.cg)
	}
	f()
}

// sample asks pick repeatedly. Every answer must consist of candidates only
// (header entries distinct, headerLen of them), and every candidate must be
// answered; with no candidate every answer must be a refusal.
func (p *planes) sample(plane string, s source, svc service, want []string, headerLen int, pick func() ([]string, error)) {
	t := p.t
	t.Helper()
	what := fmt.Sprintf("%s from %s to %s", plane, s.name, svc.host)
	if len(want) == 0 {
		for range refusals {
			if got, err := pick(); !errors.Is(err, errRefused) {
				t.Errorf("%s: no candidate, want a refusal; got %v, %v", what, got, err)
				return
			}
		}
		t.Logf("%-6s %-8s %-13s no candidate: refused %d×", plane, s.name, svc.host, refusals)
		return
	}
	seen := map[string]int{}
	for i := 0; i < maxSamples && (i < minSamples || len(seen) < len(want)); i++ {
		got, err := pick()
		if err == nil {
			err = check(got, want, headerLen)
		}
		if err != nil {
			t.Errorf("%s (answer %d): %v", what, i+1, err)
			return
		}
		seen[got[0]]++
	}
	if len(seen) < len(want) {
		t.Errorf("%s: reached only %v of the candidates %v", what, seen, want)
	}
	t.Logf("%-6s %-8s %-13s candidates %v: %v", plane, s.name, svc.host, want, seen)
}

func check(got, want []string, headerLen int) error {
	if len(got) != headerLen {
		return fmt.Errorf("endpoint header %v has %d entries, want %d", got, len(got), headerLen)
	}
	for i, a := range got {
		if !slices.Contains(want, a) {
			return fmt.Errorf("%s is not a candidate %v (answer %v)", a, want, got)
		}
		if slices.Contains(got[:i], a) {
			return fmt.Errorf("endpoint header %v repeats %s", got, a)
		}
	}
	return nil
}

// dial connects to a VIP through the kernel and counts the outcome.
func (p *planes) dial(vip string) ([]string, error) {
	got, err := dialVIP(vip)
	switch {
	case err == nil:
		p.redirected++
		return []string{got}, nil
	case errors.Is(err, errRefused):
		p.refused++
	}
	return nil, err
}

// ask sends one request for host through a `wasm serve` proxy and returns
// the endpoint header the backend received, after checking that its first
// entry is the backend that answered. A strict-mode 503 is errRefused.
func ask(proxy, host string) ([]string, error) {
	resp, body, err := get(proxy+"/", host)
	switch {
	case err != nil:
		return nil, err
	case resp.StatusCode == 503 && resp.Header.Get("X-Loctree-Reason") == "no-candidate":
		return nil, errRefused
	case resp.StatusCode != 200:
		return nil, fmt.Errorf("proxy answered %d: %s", resp.StatusCode, strings.TrimSpace(body))
	}
	header := strings.Split(resp.Header.Get(sawHeader), ",")
	if header[0] != body {
		return nil, fmt.Errorf("the filter chose %s but %s answered", header[0], body)
	}
	return header, nil
}

// waitFilters waits until every proxy's VMs hold a tree in which svc's
// only endpoint is want (two rounds over its two workers).
func (p *planes) waitFilters(svc service, want string) {
	for _, s := range sources {
		kerneltest.Eventually(p.t, 15*time.Second, "filter of "+s.name+" sends "+svc.host+" to "+want, func() error {
			for range 4 {
				got, err := ask(p.proxies[s.name], svc.host)
				if err != nil {
					return err
				}
				if got[0] != want {
					return fmt.Errorf("%s answered from %s", svc.host, got[0])
				}
			}
			return nil
		})
	}
}

// kernelCanary checks that connects from every source reach want.
func (p *planes) kernelCanary(want string) {
	for _, s := range sources {
		p.inCgroup(s, func() {
			got, err := p.dial(canary.vip)
			if err != nil || got[0] != want {
				p.t.Fatalf("kernel from %s: canary answered from %v (%v), want %s", s.name, got, err, want)
			}
		})
	}
}

// checkKernelCounters compares the agent's kernel counters with what the
// test saw: every redirect and every refusal was the kernel's doing.
func (p *planes) checkKernelCounters(agent string, gen int) {
	p.t.Helper()
	_, body, err := get("http://"+agent+"/metrics", "")
	if err != nil {
		p.t.Fatal(err)
	}
	want := map[string]string{
		"loctree_kernel_redirects_total":                      fmt.Sprint(p.redirected),
		`loctree_kernel_refused_total{reason="no_candidate"}`: fmt.Sprint(p.refused),
		`loctree_kernel_refused_total{reason="bad_index"}`:    "0",
		`loctree_kernel_refused_total{reason="bad_family"}`:   "0",
		"loctree_generation":                                  fmt.Sprint(gen),
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		name, value, _ := strings.Cut(sc.Text(), " ")
		if w, ok := want[name]; ok {
			if value != w {
				p.t.Errorf("/metrics: %s = %s, want %s", name, value, w)
			}
			delete(want, name)
		}
	}
	if len(want) > 0 {
		p.t.Errorf("/metrics lacks %v", want)
	}
}
