// Package render builds the Istio and Kubernetes objects that put one service
// under loctree, from the official Go types (istio.io/client-go, istio.io/api,
// k8s.io/api, and go-control-plane for the Envoy patch), not from text
// templates.
package render

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Steering is how the filter's choice reaches Envoy's load balancer.
type Steering string

const (
	// SteeringOverrideHost puts Envoy's OverrideHost load-balancing policy on
	// the service's outbound clusters with an EnvoyFilter; the filter writes
	// ip:port into x-gateway-destination-endpoint.
	SteeringOverrideHost Steering = "override-host"
	// SteeringPersistentSession uses Istio's istio.io/persistent-session-header
	// Service label (no EnvoyFilter); the filter writes base64(ip:port).
	SteeringPersistentSession Steering = "persistent-session"
)

// Defaults of the rendered objects.
const (
	DefaultDomain      = "cluster.local"
	RootNamespace      = "istio-system"
	OverrideHostHeader = "x-gateway-destination-endpoint"
	SessionHeader      = "x-loctree-session"
	TreeCluster        = "outbound|15099||loctree-agent.loctree-system.svc.cluster.local"
	TreeAuthority      = "loctree-agent.loctree-system.svc.cluster.local"
)

// ErrOptions is wrapped by every error about bad Options.
var ErrOptions = errors.New("bad render options")

// Options say which service to render for, and how.
type Options struct {
	// Service is NAME.NAMESPACE.
	Service string
	// Port is the service port (not the target port).
	Port uint32
	// WasmURL is the filter module's URL (oci://, http://, https:// or
	// file://; pin oci:// images by digest). Required: there is no default,
	// so an install never ships a URL that cannot be pulled.
	WasmURL string
	// Steering defaults to SteeringOverrideHost.
	Steering Steering
	// Domain is the cluster DNS domain; default cluster.local.
	Domain string
}

// target is a checked Options.
type target struct {
	name, namespace, fqdn string
	port                  uint32
	wasmURL               string
	steering              Steering
}

func (o Options) check() (target, error) {
	name, ns, ok := strings.Cut(o.Service, ".")
	if !ok || strings.Contains(ns, ".") {
		return target{}, fmt.Errorf("%w: service %q: want NAME.NAMESPACE", ErrOptions, o.Service)
	}
	for _, part := range []string{name, ns} {
		if errs := validation.IsDNS1123Label(part); len(errs) > 0 {
			return target{}, fmt.Errorf("%w: service %q: %q %s", ErrOptions, o.Service, part, strings.Join(errs, "; "))
		}
	}
	if o.Port == 0 || o.Port > 65535 {
		return target{}, fmt.Errorf("%w: port %d: want 1 to 65535", ErrOptions, o.Port)
	}
	t := target{name: name, namespace: ns, port: o.Port, wasmURL: o.WasmURL, steering: o.Steering}
	t.fqdn = fmt.Sprintf("%s.%s.svc.%s", name, ns, or(o.Domain, DefaultDomain))
	if err := checkWasmURL(o.WasmURL); err != nil {
		return target{}, err
	}
	t.steering = Steering(or(string(t.steering), string(SteeringOverrideHost)))
	if t.steering != SteeringOverrideHost && t.steering != SteeringPersistentSession {
		return target{}, fmt.Errorf("%w: steering %q: want %s or %s", ErrOptions, o.Steering, SteeringOverrideHost, SteeringPersistentSession)
	}
	return t, nil
}

// wasmSchemes are the URL schemes a WasmPlugin url accepts.
var wasmSchemes = []string{"oci://", "http://", "https://", "file://"}

func checkWasmURL(u string) error {
	if u == "" {
		return fmt.Errorf("%w: the filter module URL is required (--wasm-url oci://REGISTRY/loctree-wasm@sha256:DIGEST, from make wasm-image)", ErrOptions)
	}
	for _, s := range wasmSchemes {
		if strings.HasPrefix(u, s) && len(u) > len(s) {
			return checkDigest(u)
		}
	}
	return fmt.Errorf("%w: wasm URL %q: want one of %s followed by a location", ErrOptions, u, strings.Join(wasmSchemes, ", "))
}

// digestHex is the length of each registered OCI digest algorithm's
// encoded part (opencontainers/image-spec descriptor.md, "Registered
// algorithms": sha256 [a-f0-9]{64}, sha512 [a-f0-9]{128}).
var digestHex = map[string]int{"sha256": 64, "sha512": 128}

// checkDigest refuses an oci:// reference pinned by something that is not
// a digest: the docs' placeholder sha256:DIGEST would otherwise render a
// WasmPlugin that no registry can serve, found only when the pull fails.
func checkDigest(u string) error {
	ref, ok := strings.CutPrefix(u, "oci://")
	if !ok {
		return nil
	}
	_, digest, pinned := strings.Cut(ref, "@")
	if !pinned {
		return nil
	}
	alg, hex, _ := strings.Cut(digest, ":")
	n, known := digestHex[alg]
	if known && len(hex) == n && strings.Trim(hex, "0123456789abcdef") == "" {
		return nil
	}
	return fmt.Errorf("%w: wasm URL %q: the digest %q is not sha256: and 64 lowercase hex characters (or sha512: and 128); "+
		"give the image's digest (the manifest digest make wasm-image prints, or crane digest IMAGE)", ErrOptions, u, digest)
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Render returns, in apply order: the mesh-wide WasmPlugin, a server-side
// apply patch that opts the Service in (and, for persistent-session, labels
// it), the EnvoyFilter (override-host only) and a DestinationRule with
// outlier detection. Errors wrap ErrOptions.
func Render(o Options) ([]runtime.Object, error) {
	t, err := o.check()
	if err != nil {
		return nil, err
	}
	plugin, err := wasmPlugin(t)
	if err != nil {
		return nil, err
	}
	objs := []runtime.Object{plugin, servicePatch(t)}
	if t.steering == SteeringOverrideHost {
		ef, err := envoyFilter(t)
		if err != nil {
			return nil, err
		}
		objs = append(objs, ef)
	}
	return append(objs, destinationRule(t)), nil
}
