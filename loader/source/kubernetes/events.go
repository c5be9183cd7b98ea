package kubernetes

import (
	"errors"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// Reasons of the Warning Events the source raises: a bad annotation (on
// the Service), a DestinationRule setting the tree cannot honour (on the
// DestinationRule).
const (
	ReasonBadAnnotation   = "LoctreeBadAnnotation"
	ReasonUnsupportedRule = "LoctreeUnsupportedRule"
)

// eventSink records Events on Services through the API server.
type eventSink struct {
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
}

func newEventSink(client Client, node string) *eventSink {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return &eventSink{
		broadcaster: b,
		recorder:    b.NewRecorder(eventScheme, corev1.EventSource{Component: "loctree-agent", Host: node}),
	}
}

// eventScheme knows the only kind the agent raises Events on (Services):
// the recorder needs a scheme to name the object, and client-go's full
// scheme would link every API group.
var eventScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		panic("loader/source/kubernetes: core/v1 scheme: " + err.Error())
	}
	return s
}()

func (e *eventSink) shutdown() { e.broadcaster.Shutdown() }

// reportBad tells the Service's owner, once per distinct error, that an
// annotation was rejected and the last good settings stay. Every agent logs
// it; only the reporter node's agent raises the Event, so a cluster of N
// nodes does not get N copies.
func (s *Source) reportBad(svc *corev1.Service, err error) {
	key := svc.Namespace + "/" + svc.Name
	msg := err.Error()
	if s.state.reported[key] == msg {
		return
	}
	s.state.reported[key] = msg
	_, kept := s.state.good[key]
	note := "; the service is not managed until it is fixed"
	if kept {
		note = "; the last good settings stay in force"
	}
	var re *ruleError
	if !errors.As(err, &re) {
		s.cfg.Logger.Warn("service annotation rejected", "service", key, "err", err, "kept_last_good", kept)
		if s.isReporter() {
			s.events.recorder.Event(svc, corev1.EventTypeWarning, ReasonBadAnnotation, msg+note)
		}
		return
	}
	s.cfg.Logger.Warn("destination rule not honoured", "service", key, "destination_rule", re.rule.namespace+"/"+re.rule.name, "err", err, "kept_last_good", kept)
	if s.isReporter() {
		s.events.recorder.Event(re.rule.reference(), corev1.EventTypeWarning, ReasonUnsupportedRule, "service "+key+": "+msg+note)
	}
}

// isReporter says this agent's node has the smallest name of the known
// nodes (or no node is known): the one agent that raises Events.
func (s *Source) isReporter() bool {
	nodes, err := s.nodes.List(labels.Everything())
	if err != nil {
		return true
	}
	for _, n := range nodes {
		if n.Name < s.cfg.NodeName {
			return false
		}
	}
	return true
}

func asSlices(objs []any) []*discoveryv1.EndpointSlice {
	out := make([]*discoveryv1.EndpointSlice, 0, len(objs))
	for _, o := range objs {
		if sl, ok := o.(*discoveryv1.EndpointSlice); ok {
			out = append(out, sl)
		}
	}
	return out
}
