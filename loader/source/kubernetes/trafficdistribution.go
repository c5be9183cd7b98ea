package kubernetes

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// AnnotationTrafficDistribution is Istio's annotation for a Service's
// traffic distribution, on the Service or on its Namespace, read when
// spec.trafficDistribution is unset.
const AnnotationTrafficDistribution = "networking.istio.io/traffic-distribution"

// trafficDist is Istio's model.TrafficDistribution.
type trafficDist int

const (
	tdAny trafficDist = iota
	tdSameZone
	tdSameNode
)

// trafficDistribution follows Istio's GetTrafficDistribution (istio/istio
// pilot/pkg/model/service.go:841): a known spec.trafficDistribution, else
// the Service's annotation, else its Namespace's, compared without case.
// Istio logs an unknown annotation value and falls back to no preference;
// here it is an error naming the object, so the typo is seen.
func trafficDistribution(svc *corev1.Service, nsAnn map[string]string) (trafficDist, error) {
	if v := svc.Spec.TrafficDistribution; v != nil {
		switch *v {
		case preferClose, preferSameZone:
			return tdSameZone, nil
		case preferSameNode:
			return tdSameNode, nil
		}
	}
	if v := svc.Annotations[AnnotationTrafficDistribution]; v != "" {
		return parseTrafficDist(v, "service")
	}
	if v := nsAnn[AnnotationTrafficDistribution]; v != "" {
		return parseTrafficDist(v, "namespace "+svc.Namespace)
	}
	return tdAny, nil
}

func parseTrafficDist(v, on string) (trafficDist, error) {
	switch strings.ToLower(v) {
	case strings.ToLower(preferClose), strings.ToLower(preferSameZone):
		return tdSameZone, nil
	case strings.ToLower(preferSameNode):
		return tdSameNode, nil
	}
	return tdAny, fmt.Errorf("%w: %s on the %s: %q: want PreferClose, PreferSameZone or PreferSameNode", ErrBadAnnotation, AnnotationTrafficDistribution, on, v)
}
