package manifest

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"sigs.k8s.io/yaml"

	// The Envoy extensions loctree's examples use, registered for Any resolution.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/stateful_session/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/http/stateful_session/header/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/override_host/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
)

// DecodeEnvoy decodes a YAML or JSON Envoy configuration into msg (a
// go-control-plane type) with protojson, which rejects unknown fields and
// unknown Any types, and then validates it with ValidateEnvoy.
func DecodeEnvoy(doc []byte, msg proto.Message) error {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := protojson.Unmarshal(js, msg); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, msg.ProtoReflect().Descriptor().FullName(), err)
	}
	return ValidateEnvoy(msg)
}

// MergeEnvoy decodes a YAML or JSON fragment of dst's type strictly, merges
// it into dst (proto.Merge, as an Istio EnvoyFilter MERGE patch does) and
// validates the result with ValidateEnvoy.
func MergeEnvoy(fragment []byte, dst proto.Message) error {
	patch := dst.ProtoReflect().New().Interface()
	js, err := yaml.YAMLToJSON(fragment)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := protojson.Unmarshal(js, patch); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, patch.ProtoReflect().Descriptor().FullName(), err)
	}
	proto.Merge(dst, patch)
	return ValidateEnvoy(dst)
}

// ValidateEnvoy runs go-control-plane's ValidateAll (the proto's validation
// rules, as Envoy applies them) on msg and on every message packed in an Any
// anywhere inside it, which ValidateAll alone does not open.
func ValidateEnvoy(msg proto.Message) error {
	if v, ok := msg.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalid, msg.ProtoReflect().Descriptor().FullName(), err)
		}
	}
	return walkAnys(msg.ProtoReflect())
}

func walkAnys(m protoreflect.Message) error {
	if a, ok := m.Interface().(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalid, a.GetTypeUrl(), err)
		}
		return ValidateEnvoy(inner)
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		err = walkField(fd, v)
		return err == nil
	})
	return err
}

func walkField(fd protoreflect.FieldDescriptor, v protoreflect.Value) error {
	switch {
	case fd.IsList() && fd.Message() != nil:
		l := v.List()
		for i := range l.Len() {
			if err := walkAnys(l.Get(i).Message()); err != nil {
				return err
			}
		}
	case fd.IsMap() && fd.MapValue().Message() != nil:
		var err error
		v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
			err = walkAnys(mv.Message())
			return err == nil
		})
		return err
	case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
		return walkAnys(v.Message())
	}
	return nil
}
