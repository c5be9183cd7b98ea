module github.com/loctree/loctree

go 1.26

require (
	github.com/cilium/ebpf v0.22.0
	gopkg.in/yaml.v3 v3.0.1
)

require golang.org/x/sys v0.44.0 // indirect

tool github.com/cilium/ebpf/cmd/bpf2go
