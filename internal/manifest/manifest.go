// Package manifest decodes Kubernetes and Istio manifests strictly into their
// official Go types (unknown or duplicate fields are errors), and checks Envoy
// configuration fragments against go-control-plane's types and validation
// rules. No API server, Istio or Envoy is involved: this is what can be
// checked without them.
package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	istioscheme "istio.io/client-go/pkg/clientset/versioned/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	k8sscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// ErrInvalid is wrapped by every decoding and validation error.
var ErrInvalid = errors.New("invalid manifest")

// Split splits a YAML stream into its non-empty documents.
func Split(data []byte) ([][]byte, error) {
	r := yamlutil.NewYAMLReader(bufioReader(data))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: split documents: %v", ErrInvalid, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) > 0 {
			docs = append(docs, doc)
		}
	}
}

// Decode decodes one YAML or JSON document into the official Go type its
// apiVersion and kind name: Kubernetes types from k8s.io/api, Istio types from
// istio.io/client-go (whose specs are decoded with protojson, which rejects
// unknown fields). A field the type does not have is an error.
func Decode(doc []byte) (runtime.Object, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	gvk := schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
	if obj, err := istioscheme.Scheme.New(gvk); err == nil {
		return decodeIstio(doc, gvk, obj)
	}
	obj, err := k8sscheme.Scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("%w: unknown kind %s", ErrInvalid, gvk)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, gvk.Kind, err)
	}
	return obj, nil
}

// istioDoc is the envelope of an Istio object; its spec is a protobuf message.
type istioDoc struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            json.RawMessage   `json:"spec"`
}

func decodeIstio(doc []byte, gvk schema.GroupVersionKind, obj runtime.Object) (runtime.Object, error) {
	var env istioDoc
	if err := yaml.UnmarshalStrict(doc, &env); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, gvk.Kind, err)
	}
	v := reflect.ValueOf(obj).Elem()
	v.FieldByName("TypeMeta").Set(reflect.ValueOf(env.TypeMeta))
	v.FieldByName("ObjectMeta").Set(reflect.ValueOf(env.Metadata))
	spec, ok := v.FieldByName("Spec").Addr().Interface().(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%w: %s has no protobuf spec", ErrInvalid, gvk.Kind)
	}
	if err := protojson.Unmarshal(env.Spec, spec); err != nil {
		return nil, fmt.Errorf("%w: %s %s spec: %v", ErrInvalid, gvk.Kind, env.Metadata.Name, err)
	}
	return obj, nil
}
