package main

import (
	"fmt"
	"strings"

	"github.com/loctree/loctree/filter/shareddata"
	"github.com/loctree/loctree/host"
	"github.com/loctree/loctree/shared"
)

// publishedTree is the tree the loctree filter published in the host's
// shared data; nil before it has one (or for another module).
func publishedTree(sd *host.SharedData) *shared.Tree {
	blob, _, ok := sd.Get(shareddata.Tree)
	if !ok {
		return nil
	}
	t, err := shared.Decode(blob)
	if err != nil {
		return nil
	}
	return t
}

// requestNames is what a request names its service by, in the order the
// filter tries them (shared.RequestNames, the filter's rule): the cluster
// name when there is one, else :authority.
func requestNames(cluster, authority string) (what string, names []string) {
	key, fromCluster, what := authority, false, fmt.Sprintf(":authority %q", authority)
	if cluster != "" {
		key, fromCluster, what = cluster, true, fmt.Sprintf("cluster %q", cluster)
	}
	var scratch []byte
	first, second := shared.RequestNames(key, fromCluster, &scratch)
	names = []string{strings.Clone(first)}
	if second != "" {
		names = append(names, second)
	}
	return what, names
}

// unknownService says that no service of t answers to the request's
// names, listing the services; "" when one does.
func unknownService(t *shared.Tree, cluster, authority string) string {
	what, names := requestNames(cluster, authority)
	for _, n := range names {
		if _, ok := t.Service(n); ok {
			return ""
		}
	}
	return fmt.Sprintf("no service of the tree matches %s (generation %d; services: %s)", what, t.Generation(), serviceHosts(t))
}

// serviceHosts is "name (host, host), ..." for every service of t.
func serviceHosts(t *shared.Tree) string {
	var out []string
	for _, s := range t.Services() {
		if len(s.Hosts()) == 0 {
			out = append(out, safe(s.Name()))
			continue
		}
		out = append(out, fmt.Sprintf("%s (%s)", safe(s.Name()), joinSafe(s.Hosts(), ", ")))
	}
	return strings.Join(out, ", ")
}

// runNote is the host's line in `wasm run`'s logs when the loctree filter
// had a tree and the request named no service of it.
func runNote(sd *host.SharedData, properties []string, req host.Headers) *logOutput {
	t := publishedTree(sd)
	if t == nil {
		return nil
	}
	var cluster string
	for _, p := range properties {
		if v, ok := strings.CutPrefix(p, "xds.cluster_name="); ok {
			cluster = v
		}
	}
	authority, _ := req.Get(":authority")
	msg := unknownService(t, cluster, authority)
	if msg == "" {
		return nil
	}
	return &logOutput{Level: "warn", Message: "loctree wasm run: " + msg + "; the filter passed the request through untouched"}
}

// serveExplain tells why the filter named no endpoint for a request of
// `wasm serve`: no tree yet, or a host no service answers to ("": another
// reason, such as no eligible endpoint).
func serveExplain(sd *host.SharedData) func(host.Headers) string {
	return func(req host.Headers) string {
		t := publishedTree(sd)
		if t == nil {
			return "no tree yet: the filter has not loaded a tree (is its tree source reachable? see the filter's log)"
		}
		authority, _ := req.Get(":authority")
		if msg := unknownService(t, "", authority); msg != "" {
			return fmt.Sprintf("unknown host %q: %s", authority, msg)
		}
		return ""
	}
}
