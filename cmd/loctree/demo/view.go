package demo

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// redraw draws the current phase in place (cursor home, clear screen).
func (d *demo) redraw() {
	t := d.trafficNow() // outside the lock: an HTTP call
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur == nil {
		return
	}
	var b strings.Builder
	b.WriteString("\x1b[H\x1b[2J")
	d.drawLocked(&b, d.cur, phaseIndex(d.cur.Name))
	drawTraffic(&b, t)
	io.WriteString(d.cfg.View, b.String())
}

// draw draws a finished phase.
func (d *demo) draw(w io.Writer, res *PhaseResult, i int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.drawLocked(w, res, i)
}

func phaseIndex(name string) int {
	for i, p := range phases {
		if p.name == name {
			return i
		}
	}
	return 0
}

const barWidth = 20

func (d *demo) drawLocked(w io.Writer, res *PhaseResult, i int) {
	fmt.Fprintf(w, "loctree demo: %s (VIP %s), scopes region/zone, failover, random\n", ServiceName, VIP)
	fmt.Fprintf(w, "phase %d/%d %s: %s (tree generation %d)\n", i+1, len(phases), res.Name, res.Description, res.Generation)
	fmt.Fprintf(w, "  kernel = connections to the VIP from the source's cgroup (eBPF connect4)\n")
	fmt.Fprintf(w, "  L7     = requests through the source's proxy (proxy-wasm filter in wazero)\n")
	for _, s := range res.Sources {
		fmt.Fprintf(w, "\nfrom %-26s candidates: %s\n", localityName(s.Locality), candidateLocalities(s.Candidates))
		fmt.Fprintf(w, "  %-26s %-36s %s\n", "lands in", "kernel", "L7")
		for _, l := range landed(s) {
			fmt.Fprintf(w, "  %-26s %s   %s\n", l, share(s.Kernel, l), share(s.L7, l))
		}
		if s.Kernel.Errors+s.L7.Errors+s.Kernel.Outside+s.L7.Outside > 0 {
			fmt.Fprintf(w, "  errors: kernel %d, L7 %d; outside the candidates: kernel %d, L7 %d %s\n",
				s.Kernel.Errors, s.L7.Errors, s.Kernel.Outside, s.L7.Outside, lastError(s))
		}
	}
	fmt.Fprintln(w)
}

// share is "██████······ 52.1%   120" for locality l.
func share(s Spread, l string) string {
	n := s.Localities[l]
	if s.Total == 0 {
		return fmt.Sprintf("%s %5s %5d", strings.Repeat("·", barWidth), "-", 0)
	}
	full := n * barWidth / s.Total
	return fmt.Sprintf("%s%s %5.1f%% %5d", strings.Repeat("█", full), strings.Repeat("·", barWidth-full), 100*float64(n)/float64(s.Total), n)
}

// landed is every locality the source's traffic reached or may reach.
func landed(s SourceResult) []string {
	set := map[string]bool{}
	for _, c := range s.Candidates {
		set[backendLocality(c)] = true
	}
	for l := range s.Kernel.Localities {
		set[l] = true
	}
	for l := range s.L7.Localities {
		set[l] = true
	}
	out := make([]string, 0, len(set))
	for l := range set {
		out = append(out, l)
	}
	slices.Sort(out)
	return out
}

// candidateLocalities is "us-east/us-east-1b (1 endpoint)" and the like.
func candidateLocalities(cands []string) string {
	if len(cands) == 0 {
		return "none"
	}
	n := map[string]int{}
	for _, c := range cands {
		n[backendLocality(c)]++
	}
	var out []string
	for l, k := range n {
		out = append(out, fmt.Sprintf("%s ×%d", l, k))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

func lastError(s SourceResult) string {
	if s.Kernel.LastError != "" {
		return "(kernel: " + s.Kernel.LastError + ")"
	}
	if s.L7.LastError != "" {
		return "(L7: " + s.L7.LastError + ")"
	}
	return ""
}

// drawSummary prints every phase in a few lines: per source, the share of
// each plane's answers per locality (kernel | L7).
func drawSummary(w io.Writer, sum *Summary) {
	fmt.Fprintf(w, "summary: where each source's traffic landed, share of answers (kernel | L7)\n")
	for _, ph := range sum.Phases {
		fmt.Fprintf(w, "%s (generation %d): %s\n", ph.Name, ph.Generation, ph.Description)
		for _, s := range ph.Sources {
			var parts []string
			for _, l := range landed(s) {
				parts = append(parts, fmt.Sprintf("%s %s | %s", l, pct(s.Kernel, l), pct(s.L7, l)))
			}
			fmt.Fprintf(w, "  from %-26s %s\n", localityName(s.Locality), strings.Join(parts, ", "))
		}
	}
	drawTraffic(w, sum.Traffic)
}

func pct(s Spread, l string) string {
	if s.Total == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*float64(s.Localities[l])/float64(s.Total))
}
