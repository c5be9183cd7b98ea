GO ?= go
PKGS := ./...
FUZZTIME ?= 10s
# The revision `loctree version` prints when Go cannot stamp it (a git worktree).
REVISION := $(shell git rev-parse HEAD 2>/dev/null)$(shell git status --porcelain 2>/dev/null | grep -q . && echo -modified)

.PHONY: build test check bench fuzz wasm
# Compiles every package and writes the CLI to bin/loctree.
build:
	$(GO) build $(PKGS)
	$(GO) build -ldflags "-X main.revision=$(REVISION)" -o bin/loctree ./cmd/loctree

# A package's tests may take longer than go test's default 10 minutes on a
# loaded 2-core machine (the Kubernetes source's, with the real control plane).
test:
	$(GO) test -count=1 -timeout 20m $(PKGS)

check:
	$(GO) vet $(PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	GOOS=wasip1 GOARCH=wasm $(GO) build ./shared/...
	GOOS=wasip1 GOARCH=wasm $(GO) vet ./filter/...
	$(MAKE) wasm
	$(GO) mod tidy -diff

bench:
	$(GO) test -run='^$$' -bench=. -benchmem $(PKGS)

# Every fuzz target for FUZZTIME each (found by grep, not by building every
# test binary to list them). Cost: see "Development" in README.md.
fuzz:
	@for f in $$(git grep -l '^func Fuzz' -- '*_test.go'); do \
	  for t in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
	    echo "fuzz ./$$(dirname $$f) $$t"; $(GO) test -run='^$$' -fuzz="^$$t$$" -fuzztime=$(FUZZTIME) ./$$(dirname $$f) || exit 1; \
	  done; \
	done

.PHONY: generate generate-check
# Regenerates the committed bpf2go output (needs clang, llvm-strip, libbpf-dev)
# and the WDS types of the xDS source (needs protoc: protobuf-compiler).
WORKLOADAPI := loader/source/xds/internal/workloadapi
generate:
	$(GO) generate ./bpf/... ./$(WORKLOADAPI)

# CI: regenerate and fail if the committed BPF objects, bindings or WDS types differ.
generate-check: generate
	@git diff --exit-code -- bpf/ $(WORKLOADAPI) || { echo "bpf/ or $(WORKLOADAPI) is stale: run make generate and commit"; exit 1; }

.PHONY: cluster-build cluster-up cluster-down
# The real control plane the Kubernetes and xDS tests run against (etcd and
# kube-apiserver, internal/testing/realcp): built from their Go modules by
# the separate module internal/testing/realcp/tools into a cache directory
# keyed by their versions, and istiod (pilot-discovery) by the module
# internal/testing/realcp/istiodtools into one keyed by istio's (a no-op
# once built); cost: "Development" in README.md. Without it those tests
# skip; CI builds it before make test.
REALCP := internal/testing/realcp/cmd/realcp
cluster-build:
	$(GO) run ./$(REALCP) build

# Starts the control plane in the background on 127.0.0.1 and prints its
# kubeconfig and how to point `loctree agent --source kubernetes` at it.
cluster-up: cluster-build
	$(GO) build -o bin/realcp ./$(REALCP)
	bin/realcp up

cluster-down:
	$(GO) run ./$(REALCP) down

.PHONY: test-kernel test-race
# CI (root): the kernel tests (BPF programs, cgroup2 and bpffs mounts) must
# run, not skip (the opt-in measurements, TestMeasure*, excepted). On a
# failure the whole output is shown, not just its summary.
test-kernel:
	@out=$$($(GO) test -count=1 -v ./bpf/... ./loader/... ./cmd/loctree/... ./e2e/... 2>&1); status=$$?; \
	if [ $$status -ne 0 ]; then echo "$$out"; else echo "$$out" | grep -E '^(--- |ok|FAIL|panic)'; fi; \
	if echo "$$out" | grep -- '--- SKIP' | grep -qv -- '--- SKIP: TestMeasure'; then echo "kernel tests skipped: CI runs as root and must not skip them"; exit 1; fi; \
	exit $$status

# The native packages with the race detector (CI runs it after make test).
RACE_PKGS := ./shared/... ./loader/... ./host/... ./filter/...
test-race:
	$(GO) test -race -count=1 -timeout 30m $(RACE_PKGS)

# The proxy-wasm filter, built with the standard Go compiler as a reactor.
wasm:
	GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -o bin/loctree.wasm ./filter

.PHONY: wasm-image
WASM ?= bin/loctree.wasm
WASM_TAG ?= latest
# The filter as an OCI image layout (bin/loctree-wasm-oci/) and a tar of it
# (bin/loctree-wasm-oci.tar) in the layout Istio's WasmPlugin oci:// URLs
# accept. Pushing is the user's step (docs/ISTIO.md).
wasm-image: wasm
	$(GO) run ./cmd/wasm-image --module $(WASM) --dir bin/loctree-wasm-oci --tar bin/loctree-wasm-oci.tar --tag $(WASM_TAG)

.PHONY: image
IMAGE ?= loctree/loctree
IMAGE_TAG ?= 0.1.0
IMAGE_PLATFORMS ?= linux/amd64 linux/arm64
# The agent as a multi-platform OCI image (an index of linux/amd64 and
# linux/arm64) with no base image: one layer holding the static loctree
# binary, its entrypoint. Written as an OCI image layout (bin/loctree-oci/)
# and a tar of it (bin/loctree-oci.tar), read back and verified by digest.
# IMAGE and IMAGE_TAG are the name and tag istio/base/kustomization.yaml
# and the Helm chart use. Pushing is the user's step (docs/ISTIO.md).
image:
	@set -e; bins=; for p in $(IMAGE_PLATFORMS); do \
	  out=bin/loctree-$$(echo $$p | tr / -); \
	  echo "build $$out"; \
	  CGO_ENABLED=0 GOOS=$${p%%/*} GOARCH=$${p##*/} $(GO) build -trimpath -o $$out ./cmd/loctree; \
	  bins="$$bins --binary $$p=$$out"; \
	done; \
	$(GO) run ./cmd/agent-image $$bins --dir bin/loctree-oci --tar bin/loctree-oci.tar --tag $(IMAGE_TAG) --name $(IMAGE)
