# flashgate — see README.md. Every target installs or starts what it needs.
GO        ?= go
USERS     ?= 3000
# JOURNAL=postgres://… : make run also runs the journal process and reports what it wrote (docs/operations.md#durability)
JOURNAL   ?=
SIM_FLAGS ?= --users $(USERS) --capacity 100 --rate 3000 --session 30s --think 1s $(if $(JOURNAL),--journal '$(JOURNAL)')
# A count (Nx), not a duration: Go 1.26's fuzz coordinator can fail a duration-bounded run with a
# spurious "context deadline exceeded" at the deadline (golang/go#75804, fixed in Go 1.27).
FUZZTIME  ?= 10000x
BENCHTIME ?= 2s

WASM      ?= build/flashgate-verifier.wasm
WORKER    := examples/cloudflare-worker
BROWSER   := examples/browser

JSPKG     := js/flashgate-verifier

.PHONY: all build run serve demo test docs image image-deps wasm js js-pack wasm-toolchain worker-deps origin-deps browser-deps proxy-deps bench bench-http bench-edge bench-streams fuzz vet vulncheck clean

all: build

build:
	$(GO) build -o build/flashgate ./cmd/flashgate

## run: the flash-sale simulation (embedded issuer + order service, about a minute)
run: build
	./build/flashgate simulate $(SIM_FLAGS)

## serve: the issuer alone (embedded in-process Redis unless REDIS_URL is set)
serve: build
	./build/flashgate serve

## demo: the whole stack on loopback (issuer in visitor mode, embedded Redis unless REDIS_URL,
## the worker in workerd, a shop, a crowd ahead of you); prints a product URL to open
demo: build wasm worker-deps
	$(GO) run ./examples/demo $(DEMO_FLAGS)

## test: every test (the main module with -race; deploy/ without it: no concurrency there, and
## helm and Kubernetes compile minutes slower with it), against a throwaway redis-server (and throwaway PostgreSQL
## clusters, internal/testing/pgtest); builds the wasm verifier (TinyGo) and installs PostgreSQL (apt),
## workerd (npm), the worker's test origins (origin-deps), Chromium (apt), playwright-core (npm), nginx and
## HAProxy (apt, proxy-deps) first; then deploy/ (a module of its own: the dashboard and alert rules checked with Prometheus's parser, the Helm chart rendered and
## decoded with the Kubernetes API types, the container image built and its binary run)
test: wasm worker-deps origin-deps browser-deps image-deps proxy-deps
	pgbin=$$(scripts/ensure-postgres.sh) && \
	FLASHGATE_PG_BIN=$$pgbin FLASHGATE_WASM=$(CURDIR)/$(WASM) scripts/with-redis.sh $(GO) test -race -count=1 -timeout 20m ./...
	# allocation counts, which -race's sync.Pool makes random: the one pass without it
	scripts/with-redis.sh $(GO) test -count=1 -run 'Allocates0$$' ./issuer/
	cd deploy && $(GO) test -count=1 ./...

## image: the container image (Containerfile) with buildah, offline, no base image, for linux/amd64
## and linux/arm64 (PLATFORMS; Go cross-compiles, nothing runs emulated): one manifest list tagged
## localhost/flashgate:VERSION and the Helm chart's default image, written to
## build/flashgate-image.tar (an OCI archive with the index)
image: image-deps
	scripts/build-image.sh build/flashgate-image.tar

## image-deps: Debian's buildah and ca-certificates (apt) if missing
image-deps:
	scripts/install-buildah.sh

## wasm-toolchain: TinyGo v0.41.0 built from the Go module proxy (cached in ~/.cache/flashgate)
wasm-toolchain:
	scripts/install-tinygo.sh

## wasm: the edge verifier module (wasm-unknown, no imports)
wasm: wasm-toolchain
	scripts/build-wasm.sh $(WASM)

## js: the flashgate-verifier npm package, ready to pack (the module copied beside index.js)
js: wasm
	cp $(WASM) $(JSPKG)/flashgate-verifier.wasm

## js-pack: build/flashgate-verifier-<version>.tgz, as `npm publish` would upload it
js-pack: js
	cd $(JSPKG) && npm pack --pack-destination $(CURDIR)/build

## worker-deps: workerd (Cloudflare's Workers runtime) from npm, pinned by package-lock.json
worker-deps:
	cd $(WORKER) && npm ci --no-audit --no-fund --loglevel=error

## origin-deps: the real origins the example worker's path matrix runs in front of
## (examples/cloudflare-worker/origins_test.go): nginx, python3-flask and python3-django (apt) if
## missing, and Express (npm, pinned by package-lock.json)
origin-deps:
	scripts/install-origins.sh
	cd $(WORKER)/testdata/origins/express && npm ci --no-audit --no-fund --loglevel=error

## browser-deps: Debian's Chromium and a CJK font, playwright-core, axe-core and altcha-lib (npm, pinned by package-lock.json) for
## the browser end-to-end tests (examples/browser; altcha-lib checks the proof of work against ALTCHA's own)
browser-deps:
	scripts/install-chromium.sh
	cd $(BROWSER) && npm ci --no-audit --no-fund --loglevel=error

## proxy-deps: Debian's nginx and HAProxy (apt) if missing, for the proxy matrix
## (server/proxies_test.go: hostile client-address headers through real proxies)
proxy-deps:
	scripts/install-proxies.sh

vet:
	$(GO) vet ./...
	cd deploy && $(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }

## bench: hot-path benchmarks, each next to its physical limit in the same run, then the
## edge verifier's ratios next to their budgets (bench-edge)
bench: wasm bench-edge
	scripts/with-redis.sh $(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./verifier/ ./issuer/ ./server/

## bench-edge: the flashgate-verifier package in Node (host crypto and pure wasm against native
## verifier.Verify) and the example worker in workerd under wrk (verify+forward against forward)
bench-edge: wasm worker-deps
	FLASHGATE_WASM=$(CURDIR)/$(WASM) $(GO) test -run '^$$' -bench PackageNode -benchtime 1x ./$(JSPKG)/
	FLASHGATE_WASM=$(CURDIR)/$(WASM) scripts/bench-workerd.sh

## bench-http: the HTTP hot paths over ROUNDS interleaved rounds, on one throwaway redis-server:
## first the Go-client benchmarks (scripts/bench-http.sh, % of a bare handler), then from outside
## (tools/benchwrk): wrk (installed if missing) against `FLASHGATE_BIN serve` (default
## build/flashgate; an older build gives the before) and a bare fiber /hello, WRK_DURATION per
## run, medians of req/s and Redis/server CPU per request next to issue 13's budgets
ROUNDS        ?= 3
WRK_DURATION  ?= 5s
FLASHGATE_BIN ?= build/flashgate
bench-http: build
	scripts/install-wrk.sh
	$(GO) build -o build/benchwrk ./tools/benchwrk
	scripts/with-redis.sh sh -c 'scripts/bench-http.sh $(ROUNDS) && build/benchwrk -rounds $(ROUNDS) -duration $(WRK_DURATION) -bin "$(FLASHGATE_BIN)"'

## bench-streams: BenchmarkStreams (test/streams): STREAMS event streams of one room held open on
## two `flashgate serve` replicas (one private redis-server) by client processes on many loopback
## source addresses; memory and goroutines per stream, Redis commands per tick with and without the
## streams, admin state change → every stream (p50/p99/max), next to a bare Go server holding the
## same connections; under a minute (FLASHGATE_BIN=an older build: the before)
STREAMS ?= 20000
bench-streams:
	scripts/ensure-redis.sh
	FLASHGATE_STREAMS=$(STREAMS) $(GO) test -v -run '^$$' -bench '^BenchmarkStreams$$' -benchtime 1x -timeout 10m ./test/streams/

## fuzz: each fuzz target for FUZZTIME executions (CI runs the default pass)
FUZZ_TARGETS ?= verifier:FuzzVerify verifier:FuzzParseJWKS verifier:FuzzDecodeSegment verifier:FuzzJSONObject \
                server:FuzzHandlers wasm:FuzzWasmDifferential js/flashgate-verifier:FuzzPackageDifferential
fuzz: wasm
	@for t in $(FUZZ_TARGETS); do \
	  pkg=./$${t%%:*}/; name=$${t#*:}; echo ">> fuzz $$pkg $$name ($(FUZZTIME))"; \
	  FLASHGATE_WASM=$(CURDIR)/$(WASM) scripts/with-redis.sh $(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	done

## docs: regenerate the generated references from the code (docs/configuration.md from the env
## tags, docs/errors.md from problem/table.go, the Helm chart's README.md from its values.yaml by
## helm-docs, pinned, from the Go module proxy); their tests fail while they differ
HELM_DOCS ?= github.com/norwoodj/helm-docs/cmd/helm-docs@v1.14.2
docs:
	$(GO) generate ./cmd/flashgate ./problem
	cd deploy && $(GO) run $(HELM_DOCS) -c helm/flashgate -s file --skip-version-footer -l warning

## vulncheck: govulncheck ./... against a local copy of the Go vulnerability database
vulncheck:
	scripts/govulncheck.sh ./...

clean:
	rm -rf build $(JSPKG)/flashgate-verifier.wasm
