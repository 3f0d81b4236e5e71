# flashgate — see README.md. Every target installs or starts what it needs.
GO        ?= go
USERS     ?= 5000
SIM_FLAGS ?= --users $(USERS) --capacity 100 --rate 6000 --session 30s --think 800ms
FUZZTIME  ?= 10s
BENCHTIME ?= 2s

.PHONY: all build run serve test test-go wasm bench fuzz vet clean

all: build

build:
	$(GO) build -o build/flashgate ./cmd/flashgate

## run: the flash-sale simulation (embedded issuer + order service, about a minute)
run: build
	./build/flashgate simulate $(SIM_FLAGS)

## serve: the issuer alone (embedded in-process Redis unless REDIS_URL is set)
serve: build
	./build/flashgate serve

## test: every test, with -race, against a throwaway redis-server
test:
	scripts/with-redis.sh $(GO) test -race -count=1 ./...

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }

## bench: hot-path benchmarks, each next to its physical limit in the same run
bench:
	scripts/with-redis.sh $(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./verifier/ ./issuer/ ./server/

## fuzz: each fuzz target for FUZZTIME
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo ">> $$pkg $$f"; scripts/with-redis.sh $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

clean:
	rm -rf build
