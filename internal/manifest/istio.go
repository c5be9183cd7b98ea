package manifest

import (
	"fmt"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// IstioOutboundCluster is the shape of the outbound EDS cluster istiod
// generates for a service port (outbound|PORT||FQDN, ADS, 10s connect
// timeout): what an EnvoyFilter CLUSTER MERGE patch is merged into.
func IstioOutboundCluster(fqdn string, port uint32) *clusterv3.Cluster {
	name := fmt.Sprintf("outbound|%d||%s", port, fqdn)
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{ServiceName: name, EdsConfig: &corev3.ConfigSource{
			ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
			ResourceApiVersion:    corev3.ApiVersion_V3,
		}},
		ConnectTimeout: durationpb.New(10 * time.Second),
		LbPolicy:       clusterv3.Cluster_LEAST_REQUEST,
	}
}
