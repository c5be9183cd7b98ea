package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/loctree/loctree/host"
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"
)

// Reliability: hostile plugin configurations from issue 9, one case per item.

const treeConfig = `{"tree":{"cluster":"agent"}`

func configErr(t *testing.T, cfg string, want ...string) {
	t.Helper()
	_, err := parseConfig([]byte(cfg))
	if err == nil {
		t.Errorf("%q accepted, want an error containing %q", cfg, want)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q: error %q, want it to contain %q", cfg, err, w)
		}
	}
}

// Item 7: anything after the configuration's JSON object is an error.
func TestReliabilityConfigTrailingData(t *testing.T) {
	configErr(t, treeConfig+`}{"tree":{"cluster":"b"}}`, "after")
	configErr(t, treeConfig+`} x`, "after")
	if _, err := parseConfig([]byte(treeConfig + "}\n  \n")); err != nil {
		t.Errorf("trailing white space: %v", err)
	}
}

// Item 8: the header the filter writes must be a valid field name (RFC 9110
// token), not a pseudo-header, not hop-by-hop, not host.
func TestReliabilityConfigHeaderName(t *testing.T) {
	for _, h := range []string{":path", ":authority", "x y", "x\r\nz", "x\nz", "x:y", "é", "connection", "Transfer-Encoding",
		"te", "upgrade", "keep-alive", "proxy-connection", "host", "content-length", "x\x00", "x-envoy-original-dst-host"} {
		configErr(t, withHeader(h), "header")
	}
	for in, want := range map[string]string{"X-Chosen-Endpoint": "x-chosen-endpoint", "x_e.p~1": "x_e.p~1", "": defaultHeader} {
		c, err := parseConfig([]byte(withHeader(in)))
		if err != nil || c.Header != want {
			t.Errorf("header %q: %v, %v; want %q", in, c, err, want)
		}
	}
}

func withHeader(h string) string {
	b, _ := json.Marshal(h)
	return `{"tree":{"cluster":"agent"},"header":` + string(b) + `}`
}

// Item 11: numeric fields are range-checked, with the range in the error;
// refresh_ms 2^32 used to wrap to a tick period of 0.
func TestReliabilityConfigRanges(t *testing.T) {
	configErr(t, `{"tree":{"cluster":"agent","refresh_ms":4294967296}}`, "refresh_ms 4294967296", "10", "3600000")
	configErr(t, `{"tree":{"cluster":"agent","refresh_ms":5}}`, "refresh_ms 5")
	configErr(t, `{"tree":{"cluster":"agent","timeout_ms":4294967296}}`, "timeout_ms 4294967296", "60000")
	configErr(t, `{"tree":{"cluster":"agent","timeout_ms":-1}}`, "timeout_ms -1")
	configErr(t, `{"tree":{"cluster":"agent"},"fallbacks":-1}`, "fallbacks -1", "0..16")
	c, err := parseConfig([]byte(`{"tree":{"cluster":"agent","refresh_ms":3600000,"timeout_ms":60000}}`))
	if err != nil || c.Tree.RefreshMS != 3600000 || c.Tree.TimeoutMS != 60000 {
		t.Fatalf("upper bounds: %+v %v", c, err)
	}
}

// Item 15: an empty configuration says so (not "EOF"), and an oversized one
// is refused from its size, before it is copied into the VM.
func TestReliabilityConfigEmptyAndSize(t *testing.T) {
	configErr(t, "", "empty")
	configErr(t, " \n", "empty")
	_, reset := proxytest.NewHostEmulator(proxytest.NewEmulatorOption().WithVMContext(&vmContext{}).
		WithPluginConfiguration([]byte(treeConfig + "}")))
	defer reset()
	p := (&vmContext{}).NewPluginContext(1)
	if got := p.OnPluginStart(maxConfigBytes + 1); got != types.OnPluginStartStatusFailed {
		t.Fatalf("a configuration of %d bytes started the plugin", maxConfigBytes+1)
	}
}

// Item 15 in the wasm host: a configuration over the limit fails plugin
// start from its size with one clear line, without the VM reading it.
func TestReliabilityConfigSizeInWasm(t *testing.T) {
	big := strings.Repeat(" ", maxConfigBytes) + treeConfig + "}"
	h := newHost(t, big, host.Options{})
	start := time.Now()
	if _, err := h.NewVM(context.Background()); !errors.Is(err, host.ErrPluginStart) {
		t.Fatalf("a %d-byte configuration: %v, want a failed plugin start", len(big), err)
	}
	if n := countLogs(h, "over the limit of 16777216 bytes"); n != 1 {
		t.Fatalf("%d clear log lines, want 1: %v", n, h.Logs())
	}
	t.Logf("refused in %s", time.Since(start))
}
