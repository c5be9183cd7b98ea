package demo

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// Matrix is one plane's cross-zone counters as it exports them: the
// agent's loctree_traffic_connections_total for the kernel, the filters'
// loctree_traffic_requests_total for L7, since the demo started.
type Matrix struct {
	// Counts are by source zone, then destination zone.
	Counts map[string]map[string]uint64 `json:"counts"`
	// Placed, Cross and NoLocality are the placed picks, those to another
	// zone, and how many would have crossed with no locality.
	Placed     float64 `json:"placed"`
	Cross      float64 `json:"cross"`
	NoLocality float64 `json:"no_locality_cross"`
}

// Traffic is both planes' matrices.
type Traffic struct {
	Kernel Matrix `json:"kernel"`
	L7     Matrix `json:"l7"`
}

func (m *Matrix) add(src, dst string, n uint64) {
	if m.Counts == nil {
		m.Counts = map[string]map[string]uint64{}
	}
	if m.Counts[src] == nil {
		m.Counts[src] = map[string]uint64{}
	}
	m.Counts[src][dst] += n
}

// Total is the sum of the counts.
func (m Matrix) Total() uint64 {
	var n uint64
	for _, row := range m.Counts {
		for _, v := range row {
			n += v
		}
	}
	return n
}

// kernelMatrix reads the agent's /metrics.
func kernelMatrix(client *http.Client, agent string) (Matrix, error) {
	resp, err := client.Get("http://" + agent + "/metrics")
	if err != nil {
		return Matrix{}, err
	}
	defer resp.Body.Close()
	return parseAgentMatrix(resp.Body)
}

// parseAgentMatrix reads the traffic series of the agent's Prometheus text.
func parseAgentMatrix(r io.Reader) (Matrix, error) {
	var m Matrix
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		name, labels, value, ok := promLine(sc.Text())
		if !ok {
			continue
		}
		switch name {
		case "loctree_traffic_connections_total":
			m.add(labels["source"], labels["destination"], uint64(value))
		case "loctree_traffic_placed_connections_total":
			m.Placed = value
		case "loctree_traffic_cross_connections_total":
			m.Cross = value
		case "loctree_traffic_nolocality_cross_connections_total":
			m.NoLocality = value
		}
	}
	return m, sc.Err()
}

// promLine splits `name{k="v",...} value`.
func promLine(line string) (name string, labels map[string]string, value float64, ok bool) {
	if strings.HasPrefix(line, "#") {
		return "", nil, 0, false
	}
	series, v, found := strings.Cut(line, " ")
	if !found {
		return "", nil, 0, false
	}
	value, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return "", nil, 0, false
	}
	name, rest, _ := strings.Cut(series, "{")
	labels = map[string]string{}
	for kv := range strings.SplitSeq(strings.TrimSuffix(rest, "}"), ",") {
		if k, q, found := strings.Cut(kv, "="); found {
			if s, err := strconv.Unquote(q); err == nil {
				labels[k] = s
			}
		}
	}
	return name, labels, value, true
}

// l7Matrix sums the proxies' counters (flushed on each filter tick).
func (d *demo) l7Matrix() Matrix {
	var m Matrix
	const tagged = "loctree_traffic_requests_total"
	for _, p := range d.proxies {
		for _, x := range p.host.Metrics().Snapshot() {
			switch {
			case strings.HasSuffix(x.Name, ";.;"+tagged):
				src, dst := tagValue(x.Name, "loctree_traffic_source"), tagValue(x.Name, "loctree_traffic_destination")
				m.add(src, dst, x.Value)
			case x.Name == "loctree_traffic_placed_requests_total":
				m.Placed += float64(x.Value)
			case x.Name == "loctree_traffic_cross_requests_total":
				m.Cross += float64(x.Value)
			case x.Name == "loctree_traffic_nolocality_cross_requests_total":
				m.NoLocality += float64(x.Value)
			}
		}
	}
	return m
}

// tagValue is the value of tag in a name in the filter's tag form
// (`tag=.=value;.;`).
func tagValue(name, tag string) string {
	_, rest, _ := strings.Cut(name, tag+"=.=")
	v, _, _ := strings.Cut(rest, ";.;")
	return v
}

// trafficNow reads both planes' matrices; the kernel's is empty when the
// agent does not answer.
func (d *demo) trafficNow() Traffic {
	k, _ := kernelMatrix(d.client, d.agent)
	return Traffic{Kernel: k, L7: d.l7Matrix()}
}

// drawTraffic draws both matrices side by side: rows the source zones,
// columns the destination zones, then the cross-zone share and the share
// with no locality.
func drawTraffic(w io.Writer, t Traffic) {
	srcs, dsts := map[string]bool{}, map[string]bool{}
	for _, m := range []Matrix{t.Kernel, t.L7} {
		for src, row := range m.Counts {
			srcs[src] = true
			for dst := range row {
				dsts[dst] = true
			}
		}
	}
	rows, cols := slices.Sorted(maps.Keys(srcs)), slices.Sorted(maps.Keys(dsts))
	if len(rows) == 0 {
		return
	}
	width := len("from \\ to")
	for _, z := range slices.Concat(rows, cols) {
		width = max(width, len(z))
	}
	fmt.Fprintf(w, "zone × zone since the start, from the counters (kernel: agent /metrics | L7: filter stats)\n")
	fmt.Fprintf(w, "  %-*s", width, "from \\ to")
	for i := range 2 {
		if i > 0 {
			fmt.Fprintf(w, " |")
		}
		for _, c := range cols {
			fmt.Fprintf(w, " %*s", width, c)
		}
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		fmt.Fprintf(w, "  %-*s", width, r)
		for i, m := range []Matrix{t.Kernel, t.L7} {
			if i > 0 {
				fmt.Fprintf(w, " |")
			}
			for _, c := range cols {
				fmt.Fprintf(w, " %*d", width, m.Counts[r][c])
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "  cross-zone: kernel %s (no locality: %s) | L7 %s (no locality: %s)\n",
		share100(t.Kernel.Cross, t.Kernel.Placed), share100(t.Kernel.NoLocality, t.Kernel.Placed),
		share100(t.L7.Cross, t.L7.Placed), share100(t.L7.NoLocality, t.L7.Placed))
}

func share100(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*a/b)
}
