package main

import (
	"slices"
	"strconv"
	"strings"
)

// A case is one request through the filter. The same table runs natively
// (the SDK's proxytest) and against the built .wasm in the wazero host.
type filterCase struct {
	name       string
	config     string            // plugin configuration
	props      map[string]string // dotted property path → string value
	headers    [][2]string       // request headers
	wantStart  bool              // plugin start succeeds
	wantHeader []string          // acceptable header values; nil: header absent
	wantStatus int               // local response status; 0: none
	wantLog    string            // substring of some log line
}

// header is the header the case's configuration writes.
func (c *filterCase) header() string {
	if strings.Contains(c.config, `"header":"x-session"`) {
		return "x-session"
	}
	return defaultHeader
}

const topo = `{"services":[
 {"name":"reviews.default.svc.cluster.local","hosts":["reviews"],"endpoints":[
  {"address":"127.0.2.1:9080","locality":{"region":"us-east","zone":"us-east-1a","subzone":"rack-1"}},
  {"address":"127.0.2.2:9080","locality":{"region":"us-east","zone":"us-east-1a","subzone":"rack-2"}},
  {"address":"127.0.2.3:9080","locality":{"region":"us-east","zone":"us-east-1b","subzone":"rack-1"}},
  {"address":"127.0.2.4:9080","locality":{"region":"us-west","zone":"us-west-2a","subzone":"rack-1"}},
  {"address":"127.0.2.5:9080","locality":{"region":"us-west","zone":"us-west-2a","subzone":"rack-1"}}]},
 {"name":"ratings","mode":"strict","scopes":["region","zone"],"endpoints":[
  {"address":"127.0.3.1:9080","locality":{"region":"us-east","zone":"us-east-1a"}},
  {"address":"127.0.3.2:9080","locality":{"region":"us-west","zone":"us-west-2a"}}]},
 {"name":"details.default.svc.cluster.local","hosts":["details:9080","details.default:9080","details.default.svc:9080",
   "details.default.svc.cluster.local:9080","details","details.default","details.default.svc"],"endpoints":[
  {"address":"127.0.4.1:9080","locality":{"region":"us-east"}},
  {"address":"127.0.4.2:9080","locality":{"region":"us-west"}}]},
 {"name":"details.default.svc.cluster.local:9443","hosts":["details:9443","details.default:9443","details.default.svc:9443"],"endpoints":[
  {"address":"127.0.4.1:9443","locality":{"region":"us-east"}},
  {"address":"127.0.4.2:9443","locality":{"region":"us-west"}}]},
 {"name":"ledger","scopes":["network","region","zone","subzone"],"endpoints":[
  {"address":"127.0.5.1:8080","locality":{"network":"net-a","region":"us-east","zone":"us-east-1a"}},
  {"address":"127.0.5.2:8080","locality":{"network":"net-b","region":"us-east","zone":"us-east-1a"}},
  {"address":"127.0.5.3:8080","locality":{"network":"net-b","region":"us-west","zone":"us-west-2a"}}]},
 {"name":"cache","scopes":["cluster","node"],"endpoints":[
  {"address":"127.0.6.1:6379","locality":{"cluster":"c1","node":"node-1"}},
  {"address":"127.0.6.2:6379","locality":{"cluster":"c1","node":"node-2"}},
  {"address":"127.0.6.3:6379","locality":{"cluster":"c2","node":"node-2"}}]},
 {"name":"bounded","scopes":["region","zone"],"failover_limit":"region","endpoints":[
  {"address":"127.0.7.1:8080","locality":{"region":"us-east","zone":"us-east-1a"}},
  {"address":"127.0.7.2:8080","locality":{"region":"us-west","zone":"us-west-2a"}}]}]}`

func inline(extra string) string {
	return `{"topology":` + topo + extra + `}`
}

func req(authority string, extra ...[2]string) [][2]string {
	return append([][2]string{{":method", "GET"}, {":path", "/"}, {":authority", authority}, {":scheme", "http"}}, extra...)
}

// distTopo has a spillover service with a distribute rule that sends a
// us-east source's traffic to us-west only.
const distTopo = `{"services":[{"name":"dist","spillover":{},
 "distribute":[{"from":"us-east","to":{"us-west":100}}],"endpoints":[
  {"address":"127.0.7.1:80","locality":{"region":"us-east","zone":"a"}},
  {"address":"127.0.7.2:80","locality":{"region":"us-west","zone":"b"}},
  {"address":"127.0.7.3:80","locality":{"region":"us-west","zone":"b"}}]}]}`

var filterCases = []filterCase{
	{name: "distribute: pick and fallbacks in the targets only", config: `{"topology":` + distTopo + `,"locality":{"region":"us-east","zone":"a"},"fallbacks":3}`,
		headers: req("dist"), wantStart: true, wantHeader: []string{"127.0.7.2:80,127.0.7.3:80", "127.0.7.3:80,127.0.7.2:80"}},
	{name: "inline topology, full match", config: inline(`,"locality":{"region":"us-west","zone":"us-west-2a","subzone":"rack-1"}`),
		headers: req("reviews:9080"), wantStart: true, wantHeader: []string{"127.0.2.4:9080", "127.0.2.5:9080"}},
	{name: "spoofed header replaced", config: inline(`,"locality":{"region":"us-east","zone":"us-east-1b","subzone":"rack-1"}`),
		headers: req("reviews", [2]string{"x-gateway-destination-endpoint", "127.66.6.6:22"}), wantStart: true,
		wantHeader: []string{"127.0.2.3:9080"}},
	{name: "failover to region", config: inline(`,"locality":{"region":"us-east","zone":"us-east-1c"}`),
		headers: req("reviews"), wantStart: true, wantHeader: []string{"127.0.2.1:9080", "127.0.2.2:9080", "127.0.2.3:9080"}},
	{name: "cluster name wins over authority", config: inline(`,"locality":{"region":"us-east","zone":"us-east-1b","subzone":"rack-1"}`),
		props:   map[string]string{"xds.cluster_name": "outbound|9080||reviews.default.svc.cluster.local"},
		headers: req("other.example:80"), wantStart: true, wantHeader: []string{"127.0.2.3:9080"}},
	{name: "unknown service untouched, spoof removed", config: inline(`,"locality":{"region":"us-east"}`),
		headers: req("nope:80", [2]string{"x-gateway-destination-endpoint", "127.66.6.6:22"}), wantStart: true},
	{name: "strict match", config: inline(`,"locality":{"region":"us-west","zone":"us-west-2a"}`),
		headers: req("ratings"), wantStart: true, wantHeader: []string{"127.0.3.2:9080"}},
	{name: "strict no candidate is 503", config: inline(`,"locality":{"region":"us-west","zone":"us-west-2b"}`),
		headers: req("ratings"), wantStart: true, wantStatus: 503},
	{name: "failover within failover_limit", config: inline(`,"locality":{"region":"us-east","zone":"us-east-1c"}`),
		headers: req("bounded"), wantStart: true, wantHeader: []string{"127.0.7.1:8080"}},
	{name: "beyond failover_limit is 503", config: inline(`,"locality":{"region":"eu-west","zone":"eu-west-1a"}`),
		headers: req("bounded"), wantStart: true, wantStatus: 503},
	{name: "fallbacks", config: inline(`,"locality":{"region":"us-east","zone":"us-east-1a"},"fallbacks":1`),
		headers: req("reviews"), wantStart: true,
		wantHeader: []string{"127.0.2.1:9080,127.0.2.2:9080", "127.0.2.2:9080,127.0.2.1:9080"}},
	{name: "base64 header format", config: inline(`,"locality":{"region":"us-east","zone":"us-east-1b","subzone":"rack-1"},"header":"x-session","header_format":"base64"`),
		headers: req("reviews"), wantStart: true, wantHeader: []string{"MTI3LjAuMi4zOjkwODA="}},
	{name: "locality from xds.node.locality", config: inline(``),
		props:   map[string]string{"xds.node.locality.region": "us-west", "xds.node.locality.zone": "us-west-2a", "xds.node.locality.sub_zone": "rack-1"},
		headers: req("reviews"), wantStart: true, wantHeader: []string{"127.0.2.4:9080", "127.0.2.5:9080"}},
	{name: "locality from node LABELS", config: inline(``),
		props: map[string]string{
			`xds.node.metadata.LABELS.topology\.kubernetes\.io/region`: "us-east",
			`xds.node.metadata.LABELS.topology\.kubernetes\.io/zone`:   "us-east-1a",
			`xds.node.metadata.LABELS.topology\.istio\.io/subzone`:     "rack-2"},
		headers: req("reviews"), wantStart: true, wantHeader: []string{"127.0.2.2:9080"}},
	// A two-port Service as the Kubernetes source names it: the first TCP
	// port is the FQDN, the other "<fqdn>:<port>"; each port answers to
	// "HOST:PORT".
	{name: "two ports: cluster name of the second port", config: inline(`,"locality":{"region":"us-west"}`),
		props:   map[string]string{"xds.cluster_name": "outbound|9443||details.default.svc.cluster.local"},
		headers: req("details:9443"), wantStart: true, wantHeader: []string{"127.0.4.2:9443"}},
	{name: "two ports: cluster name of the first port", config: inline(`,"locality":{"region":"us-west"}`),
		props:   map[string]string{"xds.cluster_name": "outbound|9080||details.default.svc.cluster.local"},
		headers: req("details:9443"), wantStart: true, wantHeader: []string{"127.0.4.2:9080"}},
	{name: "two ports: cluster name with a subset", config: inline(`,"locality":{"region":"us-east"}`),
		props:   map[string]string{"xds.cluster_name": "outbound|9443|v1|details.default.svc.cluster.local"},
		headers: req("other:80"), wantStart: true, wantHeader: []string{"127.0.4.1:9443"}},
	{name: "two ports: cluster port not in the tree falls back to the host", config: inline(`,"locality":{"region":"us-west"}`),
		props:   map[string]string{"xds.cluster_name": "outbound|7000||details.default.svc.cluster.local"},
		headers: req("details:7000"), wantStart: true, wantHeader: []string{"127.0.4.2:9080"}},
	{name: "two ports: authority short name with the second port", config: inline(`,"locality":{"region":"us-west"}`),
		headers: req("details:9443"), wantStart: true, wantHeader: []string{"127.0.4.2:9443"}},
	{name: "two ports: authority FQDN with the second port", config: inline(`,"locality":{"region":"us-east"}`),
		headers: req("details.default.svc.cluster.local:9443"), wantStart: true, wantHeader: []string{"127.0.4.1:9443"}},
	{name: "two ports: authority with the first port", config: inline(`,"locality":{"region":"us-east"}`),
		headers: req("details.default:9080"), wantStart: true, wantHeader: []string{"127.0.4.1:9080"}},
	{name: "two ports: authority without a port is the first port", config: inline(`,"locality":{"region":"us-west"}`),
		headers: req("details.default.svc"), wantStart: true, wantHeader: []string{"127.0.4.2:9080"}},
	{name: "two ports: authority with an unknown port falls back to the host", config: inline(`,"locality":{"region":"us-west"}`),
		headers: req("details:7000"), wantStart: true, wantHeader: []string{"127.0.4.2:9080"}},
	// Istio's node metadata: NETWORK, CLUSTER_ID, NODE_NAME.
	{name: "network from node metadata NETWORK", config: inline(`,"fallbacks":1`),
		props: map[string]string{"xds.node.metadata.NETWORK": "net-b", "xds.node.locality.region": "us-east",
			"xds.node.locality.zone": "us-east-1a"},
		headers: req("ledger"), wantStart: true, wantHeader: []string{"127.0.5.2:8080"}},
	{name: "network from the node label topology.istio.io/network", config: inline(`,"fallbacks":1`),
		props: map[string]string{`xds.node.metadata.LABELS.topology\.istio\.io/network`: "net-a",
			"xds.node.locality.region": "us-east"},
		headers: req("ledger"), wantStart: true, wantHeader: []string{"127.0.5.1:8080"}},
	{name: "network metadata wins over the label", config: inline(`,"fallbacks":1`),
		props: map[string]string{"xds.node.metadata.NETWORK": "net-b", `xds.node.metadata.LABELS.topology\.istio\.io/network`: "net-a",
			"xds.node.locality.region": "us-west"},
		headers: req("ledger"), wantStart: true, wantHeader: []string{"127.0.5.3:8080"}},
	{name: "configured locality wins over node metadata", config: inline(`,"locality":{"network":"net-a","region":"us-east"},"fallbacks":1`),
		props:   map[string]string{"xds.node.metadata.NETWORK": "net-b", "xds.node.locality.region": "us-west"},
		headers: req("ledger"), wantStart: true, wantHeader: []string{"127.0.5.1:8080"}},
	{name: "cluster and node from CLUSTER_ID and NODE_NAME", config: inline(`,"fallbacks":1`),
		props:   map[string]string{"xds.node.metadata.CLUSTER_ID": "c1", "xds.node.metadata.NODE_NAME": "node-2"},
		headers: req("cache:6379"), wantStart: true, wantHeader: []string{"127.0.6.2:6379"}},
	{name: "cluster only from CLUSTER_ID", config: inline(`,"fallbacks":1`),
		props:   map[string]string{"xds.node.metadata.CLUSTER_ID": "c1", "xds.node.metadata.NODE_NAME": "node-3"},
		headers: req("cache"), wantStart: true, wantHeader: []string{"127.0.6.1:6379,127.0.6.2:6379", "127.0.6.2:6379,127.0.6.1:6379"}},
	{name: "no tree yet passes through", config: `{"tree":{"cluster":"outbound|15099||loctree-agent"}}`,
		headers: req("reviews", [2]string{"x-gateway-destination-endpoint", "127.66.6.6:22"}), wantStart: true},
	{name: "no tree yet, fail closed", config: `{"tree":{"cluster":"agent"},"fail_closed":true}`,
		headers: req("reviews"), wantStart: true, wantStatus: 503},
	{name: "bad config: unknown field", config: `{"topology":` + topo + `,"colour":"red"}`, wantLog: `unknown field "colour"`},
	{name: "bad config: no tree source", config: `{}`, wantLog: "exactly one tree source"},
	{name: "bad config: both tree sources", config: `{"topology":` + topo + `,"tree":{"cluster":"a"}}`, wantLog: "exactly one tree source"},
	{name: "bad config: header format", config: inline(`,"header_format":"hex"`), wantLog: `header_format "hex"`},
	{name: "bad config: not JSON", config: `{topology`, wantLog: "invalid loctree plugin configuration"},
	{name: "inline topology: a failover region no endpoint has is a warning (issue 26 item 7)",
		config: `{"topology":{"services":[{"name":"api","spillover":{},"failover":[{"from":"us-east","to":"ap-soth"}],` +
			`"endpoints":[{"address":"127.0.2.1:9080","locality":{"region":"us-east"}}]}]},"locality":{"region":"us-east"}}`,
		headers: req("api"), wantStart: true, wantHeader: []string{"127.0.2.1:9080"},
		wantLog: `loctree: inline topology: warning: service "api": failover[0].to "ap-soth": no endpoint of the service is in this region`},
	{name: "bad config: invalid topology", config: `{"topology":{"services":[{"name":"x","endpoints":[{"address":"nope"}]}]}}`,
		wantLog: "inline topology"},
}

// check compares an outcome with the case and returns a problem or "".
func (c *filterCase) check(started bool, header string, hasHeader bool, status int, logs []string) string {
	if started != c.wantStart {
		return "plugin start: got " + yesNo(started) + ", logs: " + strings.Join(logs, " | ")
	}
	if c.wantLog != "" && !slices.ContainsFunc(logs, func(l string) bool { return strings.Contains(l, c.wantLog) }) {
		return "no log line contains " + c.wantLog + ": " + strings.Join(logs, " | ")
	}
	if !started {
		return ""
	}
	if status != c.wantStatus {
		return "local response status " + itoa(status) + ", want " + itoa(c.wantStatus)
	}
	if c.wantHeader == nil && hasHeader {
		return "header present: " + header
	}
	if c.wantHeader != nil && !slices.Contains(c.wantHeader, header) {
		return "header " + header + " not in " + strings.Join(c.wantHeader, " or ")
	}
	return ""
}

func yesNo(b bool) string {
	if b {
		return "ok"
	}
	return "failed"
}

func itoa(i int) string { return strconv.Itoa(i) }
