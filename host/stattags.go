package host

import (
	"regexp"
	"sort"
)

// StatTag is one of Envoy's stats_tags: Regex's first group is cut out of
// a metric's name and its second group (else the first) is the value of
// the tag Name. Envoy searches every tag's regex in the whole name (not
// anchored unless the regex is) and cuts every match out
// (source/common/stats/tag_extractor_impl.cc:80-111 at envoyproxy/envoy
// 00a0ba12, TagExtractorStdRegexImpl::extractTag).
type StatTag struct {
	Name  string
	Regex *regexp.Regexp
}

// Tag is a tag Envoy extracted from a metric's name.
type Tag struct{ Name, Value string }

// customNamespace prefixes every metric a plugin defines in Envoy (Context::
// defineMetric); Envoy's Prometheus output strips it and adds no envoy_
// prefix (source/extensions/common/wasm/stats_handler.h, CustomStatNamespace;
// source/server/admin/prometheus_stats.cc, PrometheusStatsFormatter::
// metricName).
const customNamespace = "wasmcustom."

// IstioStatTags are the stats_tags of an Istio proxy's bootstrap with the
// given extraStatTags (ProxyConfig.extraStatTags, or the pod annotation
// sidecar.istio.io/extraStatTags): istio/istio tools/packaging/common/
// envoy_bootstrap.json:84-155 at 86c9f01f. Left out: the
// http_conn_manager_listener_prefix tag, whose lookahead Go's regexp lacks
// (anchored at ^listener, it never matches a plugin's wasmcustom. name).
func IstioStatTags(extra ...string) []StatTag {
	tags := []StatTag{
		{"cluster_name", regexp.MustCompile(`^cluster(\.(.+);)`)},
		{"http_conn_manager_prefix", regexp.MustCompile(`^http\.(((?:[_.[:digit:]\w]*|[_\[\]aAbBcCdDeEfF[:digit:]\w\:]*));\.)`)},
		{"thread_name", regexp.MustCompile(`^server(\.(.+))\.watchdog`)},
		{"tcp_prefix", regexp.MustCompile(`^tcp\.((.*?)\.)\w+?$`)},
		{"response_code", regexp.MustCompile(`_rq(_(\d{3}))$`)},
		{"response_code_class", regexp.MustCompile(`_rq(_(\dxx))$`)},
		{"listener_address", regexp.MustCompile(`^listener\.(((?:[_.[:digit:]]*|[_\[\]aAbBcCdDeEfF[:digit:]]*))\.)`)},
		{"mongo_prefix", regexp.MustCompile(`^mongo\.(.+?)\.(collection|cmd|cx_|op_|delays_|decoding_)(.*?)$`)},
	}
	for _, t := range extra {
		tags = append(tags, StatTag{t, regexp.MustCompile("(" + regexp.QuoteMeta(t) + `=\.=(.*?);\.;)`)})
	}
	return append(tags,
		StatTag{"cache", regexp.MustCompile(`(cache\.(.+?)\.)`)},
		StatTag{"component", regexp.MustCompile(`(component\.(.+?)\.)`)},
		StatTag{"tag", regexp.MustCompile(`(tag\.(.+?);\.)`)},
		StatTag{"wasm_filter", regexp.MustCompile(`(wasm_filter\.(.+?)\.)`)},
		StatTag{"authz_enforce_result", regexp.MustCompile(`rbac(\.(allowed|denied))`)},
		StatTag{"authz_dry_run_action", regexp.MustCompile(`(\.istio_dry_run_(allow|deny)_)`)},
		StatTag{"authz_dry_run_result", regexp.MustCompile(`(\.shadow_(allowed|denied))`)},
	)
}

// envoyName is how Envoy exports a plugin metric defined as name: its tags
// and its Prometheus name ("" when Envoy exports none: a name starting
// with a digit after sanitizing).
func envoyName(name string, stags []StatTag) (string, []Tag) {
	full := customNamespace + name
	var tags []Tag
	cut := make([]bool, len(full))
	for _, st := range stags {
		m := st.Regex.FindStringSubmatchIndex(full)
		if len(m) < 4 || m[2] < 0 {
			continue
		}
		v := full[m[2]:m[3]]
		if len(m) >= 6 && m[4] >= 0 {
			v = full[m[4]:m[5]]
		}
		tags = append(tags, Tag{st.Name, v})
		for i := m[2]; i < m[3]; i++ {
			cut[i] = true
		}
	}
	var kept []byte
	for i := range full {
		if !cut[i] {
			kept = append(kept, full[i])
		}
	}
	sort.SliceStable(tags, func(i, j int) bool { return tags[i].Name < tags[j].Name })
	return prometheusName(string(kept)), tags
}

// prometheusName strips the custom namespace and sanitizes the rest as
// Envoy's PrometheusStatsFormatter::sanitizeName does (every character
// outside [a-zA-Z0-9_] becomes _); metricName drops a custom metric whose
// name then starts with a digit.
func prometheusName(extracted string) string {
	if len(extracted) < len(customNamespace) || extracted[:len(customNamespace)] != customNamespace {
		return ""
	}
	b := []byte(extracted[len(customNamespace):])
	for i, c := range b {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	if len(b) == 0 || b[0] >= '0' && b[0] <= '9' {
		return ""
	}
	return string(b)
}
