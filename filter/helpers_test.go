package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/loctree/loctree/host"
	"github.com/loctree/loctree/shared"
)

func buildTree(t *testing.T, topology string, gen uint64) *shared.Tree {
	t.Helper()
	c, err := parseConfig([]byte(`{"topology":` + topology + `}`))
	if err != nil {
		t.Fatal(err)
	}
	tree, err := shared.Build(c.Topology, shared.BuildOptions{Generation: gen})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// pickOn sends one request for service to vm and returns the header.
func pickOn(t *testing.T, vm *host.VM, service string) string {
	t.Helper()
	res, err := vm.Do(context.Background(), &host.Request{Headers: host.Headers(req(service))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := res.Request.Headers.Get(defaultHeader)
	return v
}

func countLogs(h *host.Host, substr string) int {
	n := 0
	for _, l := range h.Logs() {
		if strings.Contains(l.Message, substr) {
			n++
		}
	}
	return n
}

func timeDuration(ns int64) time.Duration { return time.Duration(ns) }
