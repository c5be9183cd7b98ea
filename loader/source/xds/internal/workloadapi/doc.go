// Package workloadapi is Istio's workload discovery API (WDS,
// type.googleapis.com/istio.workload.Address): the Go types protoc-gen-go
// generates from workload.proto, a verbatim copy of istio/istio
// pkg/workloadapi/workload.proto at istio.io/istio
// v0.0.0-20260827124520-eed52ebb66ad (commit eed52ebb66ad, Apache-2.0, its
// header kept). The schema is copied rather than imported because
// istio.io/istio pins k8s.io/* at versions the agent does not build with,
// and istio.io/api does not carry it.
//
// workload.pb.go is generated, committed, and checked by `make
// generate-check` (it regenerates and fails on any difference): run `make
// generate` after changing workload.proto (needs protoc, Debian's
// protobuf-compiler; protoc-gen-go is the tool pinned in go.mod).
package workloadapi

//go:generate sh -c "protoc --plugin=protoc-gen-go=$(go tool -n protoc-gen-go) --go_out=. --go_opt=paths=source_relative --go_opt=Mworkload.proto=github.com/loctree/loctree/loader/source/xds/internal/workloadapi workload.proto"
