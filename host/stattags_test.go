package host

import (
	"reflect"
	"testing"
)

// TestEnvoyName: how Envoy (with an Istio proxy's stats_tags) exports a
// plugin's metric. Each want is derived by hand from Envoy's rules: the
// name is wasmcustom.<defined> (Context::defineMetric), every stats_tags
// regex is searched in that whole name and its first group cut out, its
// second group the value (tag_extractor_impl.cc:80-111 at 00a0ba12), the
// custom namespace stripped and the rest sanitized to [a-zA-Z0-9_], a
// leading digit dropping the metric (prometheus_stats.cc,
// PrometheusStatsFormatter::metricName and sanitizeName); the tags are
// Istio's bootstrap ones (envoy_bootstrap.json:84-155) plus extraStatTags
// as `(<tag>=\.=(.*?);\.;)` (lines 121-126).
func TestEnvoyName(t *testing.T) {
	loctree := IstioStatTags("loctree_service", "loctree_level")
	tests := []struct {
		name, defined string
		tags          []StatTag
		want          string
		wantTags      []Tag
	}{
		{"tags extracted", "loctree_service=.=reviews.default.svc.cluster.local;.;loctree_level=.=3;.;loctree_service_picks_total", loctree,
			"loctree_service_picks_total", []Tag{{"loctree_level", "3"}, {"loctree_service", "reviews.default.svc.cluster.local"}}},
		{"no extraStatTags: the tags stay in the name", "loctree_service=.=a.b;.;loctree_service_picks_total", IstioStatTags(),
			"loctree_service___a_b___loctree_service_picks_total", nil},
		{"a service named cache.x. also gets Istio's cache tag", "loctree_service=.=cache.default.svc;.;loctree_service_no_candidate_total", loctree,
			"loctree_service_no_candidate_total", []Tag{{"cache", "default"}, {"loctree_service", "cache.default.svc"}}},
		{"untagged", "loctree_picks_depth_3_total", loctree, "loctree_picks_depth_3_total", nil},
		{"^cluster does not match under wasmcustom.", "cluster.x;", loctree, "cluster_x_", nil},
		{"a leading digit is not exported", "3rd", loctree, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, tags := envoyName(tt.defined, tt.tags)
			if got != tt.want || !reflect.DeepEqual(tags, tt.wantTags) {
				t.Errorf("envoyName(%q) = %q %v, want %q %v", tt.defined, got, tags, tt.want, tt.wantTags)
			}
		})
	}
}
