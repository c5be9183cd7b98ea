package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/loctree/loctree/shared"
)

// Config is the plugin configuration (JSON). Every field is optional except
// that exactly one tree source, topology or tree, must be given.
type Config struct {
	// Topology is an inline topology (the topology file's schema).
	Topology *shared.Topology `json:"topology,omitempty"`
	// Tree fetches the encoded tree from the agent's tree server.
	Tree *TreeSource `json:"tree,omitempty"`
	// Locality overrides the proxy's locality (scope key → value).
	Locality map[string]string `json:"locality,omitempty"`
	// Header receives the chosen endpoint(s); default
	// x-gateway-destination-endpoint.
	Header string `json:"header,omitempty"`
	// HeaderFormat is "plain" (ip:port[,ip:port...]) or "base64"
	// (base64 of ip:port, for Envoy's stateful-session header).
	HeaderFormat string `json:"header_format,omitempty"`
	// Fallbacks is how many further distinct candidates follow the pick.
	Fallbacks int `json:"fallbacks,omitempty"`
	// FailClosed answers 503 while no tree is known (default: pass through).
	FailClosed bool `json:"fail_closed,omitempty"`
	// TrafficScope is the scope key the cross-zone traffic counters
	// report by (loctree_traffic_*); default zone.
	TrafficScope string `json:"traffic_scope,omitempty"`
}

// TreeSource says where the agent's tree server is.
type TreeSource struct {
	Cluster   string `json:"cluster"`
	Authority string `json:"authority,omitempty"`
	Path      string `json:"path,omitempty"`
	RefreshMS int    `json:"refresh_ms,omitempty"`
	TimeoutMS int    `json:"timeout_ms,omitempty"`
}

const (
	defaultHeader    = "x-gateway-destination-endpoint"
	defaultPath      = "/v1/tree"
	defaultRefreshMS = 5000
	defaultTimeoutMS = 2000
	maxFallbacks     = 16
)

var errConfig = errors.New("invalid loctree plugin configuration")

// parseConfig decodes and validates the plugin configuration, filling in
// defaults. Errors say which field is wrong.
func parseConfig(data []byte) (*Config, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf(`%w: empty; give a JSON object with "topology" or "tree"`, errConfig)
	}
	var c Config
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%w: %w", errConfig, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: data after the JSON object at byte %d; give one object", errConfig, dec.InputOffset())
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", errConfig, err)
	}
	return &c, nil
}

func (c *Config) validate() error {
	switch {
	case (c.Topology == nil) == (c.Tree == nil):
		return errors.New(`give exactly one tree source: "topology" (inline) or "tree" (agent)`)
	case c.Fallbacks < 0 || c.Fallbacks > maxFallbacks:
		return fmt.Errorf("fallbacks %d: must be 0..%d", c.Fallbacks, maxFallbacks)
	}
	switch c.HeaderFormat {
	case "", "plain", "base64":
	default:
		return fmt.Errorf(`header_format %q: must be "plain" or "base64"`, c.HeaderFormat)
	}
	if c.Header == "" {
		c.Header = defaultHeader
	}
	if c.TrafficScope == "" {
		c.TrafficScope = defaultTrafficScope
	}
	if !taggable(c.TrafficScope) || strings.TrimSpace(c.TrafficScope) != c.TrafficScope {
		return fmt.Errorf("traffic_scope %q: must be a scope key (region, zone, subzone, node or a label key) without surrounding spaces, =.= or ;.;", c.TrafficScope)
	}
	c.Header = strings.ToLower(c.Header)
	if err := checkHeaderName(c.Header); err != nil {
		return err
	}
	if c.Tree != nil {
		return c.Tree.validate()
	}
	return nil
}

func (t *TreeSource) validate() error {
	if t.Cluster == "" {
		return errors.New(`tree.cluster: required (the Envoy cluster of the loctree agent)`)
	}
	if t.Path == "" {
		t.Path = defaultPath
	}
	if !strings.HasPrefix(t.Path, "/") {
		return fmt.Errorf("tree.path %q: must start with /", t.Path)
	}
	if t.Authority == "" {
		t.Authority = shared.ClusterHost(t.Cluster)
	}
	if t.RefreshMS == 0 {
		t.RefreshMS = defaultRefreshMS
	}
	if t.TimeoutMS == 0 {
		t.TimeoutMS = defaultTimeoutMS
	}
	if err := checkRange("tree.refresh_ms", t.RefreshMS, minRefreshMS, maxRefreshMS); err != nil {
		return err
	}
	return checkRange("tree.timeout_ms", t.TimeoutMS, minTimeoutMS, maxTimeoutMS)
}
