package kubernetes

// The parts of Istio's networking/v1alpha3 DestinationRule the agent reads,
// decoded from the API server's JSON (istio/api
// networking/v1alpha3/destination_rule.proto). The field names are the
// proto's JSON names; a test checks them against istio.io/api's Go types, so
// the agent does not link Istio's client for a few fields.

// destinationRule is a DestinationRule's identity and the spec fields that
// change locality load balancing.
type destinationRule struct {
	namespace, name, uid string
	created              int64 // creation time, Unix seconds: the oldest rule of a host wins
	spec                 destinationRuleSpec
	err                  error // why the spec could not be read
}

type destinationRuleSpec struct {
	Host             string            `json:"host"`
	TrafficPolicy    *trafficPolicy    `json:"trafficPolicy,omitempty"`
	ExportTo         []string          `json:"exportTo,omitempty"`
	WorkloadSelector *workloadSelector `json:"workloadSelector,omitempty"`
}

type workloadSelector struct {
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}

// trafficPolicy keeps the fields GetEffectiveLbSetting and the cluster
// builder read; the others (tls, connectionPool, …) do not change which
// endpoints a source gets.
type trafficPolicy struct {
	LoadBalancer      *loadBalancer       `json:"loadBalancer,omitempty"`
	OutlierDetection  *outlierDetection   `json:"outlierDetection,omitempty"`
	PortLevelSettings []portTrafficPolicy `json:"portLevelSettings,omitempty"`
}

type portTrafficPolicy struct {
	Port             *portSelector     `json:"port,omitempty"`
	LoadBalancer     *loadBalancer     `json:"loadBalancer,omitempty"`
	OutlierDetection *outlierDetection `json:"outlierDetection,omitempty"`
}

type portSelector struct {
	Number uint32 `json:"number"`
}

type loadBalancer struct {
	LocalityLbSetting  *LocalityLBSetting `json:"localityLbSetting,omitempty"`
	ZoneAwareLbSetting map[string]any     `json:"zoneAwareLbSetting,omitempty"`
}

// outlierDetection: only its presence and minHealthPercent change the
// endpoints a source gets (Istio enables failover with it and sets Envoy's
// healthy_panic_threshold from minHealthPercent).
type outlierDetection struct {
	MinHealthPercent *int32 `json:"minHealthPercent,omitempty"`
}

// LocalityLBSetting is Istio's LocalityLoadBalancerSetting (a
// DestinationRule's trafficPolicy.loadBalancer.localityLbSetting, or the
// mesh default meshConfig.localityLbSetting).
type LocalityLBSetting struct {
	Distribute       []localityDistribute `json:"distribute,omitempty"`
	Failover         []localityFailover   `json:"failover,omitempty"`
	FailoverPriority []string             `json:"failoverPriority,omitempty"`
	Enabled          *bool                `json:"enabled,omitempty"`
}

type localityDistribute struct {
	From string            `json:"from,omitempty"`
	To   map[string]uint32 `json:"to,omitempty"`
}

type localityFailover struct {
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
}
