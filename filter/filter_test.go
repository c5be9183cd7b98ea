package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/loctree/loctree/host"
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"
)

// TestFilterNative drives the filter natively through the SDK's emulator.
func TestFilterNative(t *testing.T) {
	for _, c := range filterCases {
		t.Run(c.name, func(t *testing.T) {
			opt := proxytest.NewEmulatorOption().WithVMContext(&vmContext{}).WithPluginConfiguration([]byte(c.config))
			for path, v := range c.props {
				opt = opt.WithProperty(host.SplitPath(path), []byte(v))
			}
			emu, reset := proxytest.NewHostEmulator(opt)
			defer reset()
			started := emu.StartPlugin() == types.OnPluginStartStatusOK
			var (
				value  string
				has    bool
				status int
			)
			if started {
				id := emu.InitializeHttpContext()
				emu.CallOnRequestHeaders(id, c.headers, true)
				for _, kv := range emu.GetCurrentRequestHeaders(id) {
					if kv[0] == c.header() {
						value, has = kv[1], true
					}
				}
				if lr := emu.GetSentLocalResponse(id); lr != nil {
					status = int(lr.StatusCode)
				}
				emu.CompleteHttpContext(id)
			}
			logs := slices.Concat(emu.GetCriticalLogs(), emu.GetErrorLogs(), emu.GetWarnLogs())
			if problem := c.check(started, value, has, status, logs); problem != "" {
				t.Error(problem)
			}
		})
	}
}

func TestParseConfigDefaults(t *testing.T) {
	c, err := parseConfig([]byte(`{"tree":{"cluster":"outbound|15099||loctree-agent.loctree-system.svc.cluster.local"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Header != defaultHeader || c.Tree.Path != "/v1/tree" || c.Tree.RefreshMS != 5000 || c.Tree.TimeoutMS != 2000 ||
		c.Tree.Authority != "loctree-agent.loctree-system.svc.cluster.local" {
		t.Fatalf("defaults not applied: %+v %+v", c, c.Tree)
	}
	if _, err := parseConfig([]byte(`{"topology":{"services":[]},"fallbacks":17}`)); err == nil || !strings.Contains(err.Error(), "fallbacks 17") {
		t.Fatalf("fallbacks 17 accepted: %v", err)
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(inline(`,"fallbacks":2`)))
	f.Add([]byte(`{"tree":{"cluster":"a","path":"/x"}}`))
	f.Add([]byte(`{"tree":{"cluster":"a","refresh_ms":4294967296},"header":":path"}`))
	f.Add([]byte(`{"tree":{"cluster":"a"}} {"tree":{"cluster":"b"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseConfig(b)
		if err != nil {
			return
		}
		if c.Header == "" || (c.Topology == nil) == (c.Tree == nil) || checkHeaderName(c.Header) != nil {
			t.Fatalf("accepted an invalid configuration: %+v", c)
		}
		if c.Tree != nil && (c.Tree.RefreshMS < minRefreshMS || c.Tree.RefreshMS > maxRefreshMS || c.Tree.TimeoutMS < minTimeoutMS || c.Tree.TimeoutMS > maxTimeoutMS) {
			t.Fatalf("accepted out-of-range numbers: %+v", c.Tree)
		}
	})
}

// TestStreamDoneOnce: ending a stream twice (proxy_on_log, then
// proxy_on_delete) releases and recycles its context once.
func TestStreamDoneOnce(t *testing.T) {
	p := &pluginContext{}
	h := p.NewHttpContext(2).(*httpContext)
	h.OnHttpStreamDone()
	h.OnHttpStreamDone()
	if len(p.free) != 1 {
		t.Fatalf("%d recycled contexts after two ends of one stream, want 1", len(p.free))
	}
}
