GO ?= go
PKGS := ./...
FUZZTIME ?= 10s

.PHONY: build test check bench fuzz wasm
build:
	$(GO) build $(PKGS)

test:
	$(GO) test -count=1 $(PKGS)

check:
	$(GO) vet $(PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	GOOS=wasip1 GOARCH=wasm $(GO) build ./shared/...
	GOOS=wasip1 GOARCH=wasm $(GO) vet ./filter/...
	$(MAKE) wasm
	$(GO) mod tidy -diff

bench:
	$(GO) test -run='^$$' -bench=. -benchmem $(PKGS)

fuzz:
	@for pkg in $$($(GO) list $(PKGS)); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$t"; $(GO) test -run='^$$' -fuzz="^$$t$$" -fuzztime=$(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

# The proxy-wasm filter, built with the standard Go compiler as a reactor.
wasm:
	GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -o bin/loctree.wasm ./filter
