# Weft's tasks. A fresh machine needs Go, and Node with npm for the web UI:
# every target downloads what it needs through the Go module proxy and the
# npm registry (make e2e also installs Debian's chromium when it may).

GO       ?= go
GOFMT    ?= $(shell $(GO) env GOROOT)/bin/gofmt
FUZZTIME ?= 20s
# The race detector needs cgo (a C compiler); without one, tests run
# without it, and say so.
RACE     := $(shell [ "$$($(GO) env CGO_ENABLED)" = 1 ] && echo -race)

.PHONY: agentkill schedkill demo test lint vet fmt-check build bench bench-quick fuzz chaos ownerkill clean sim sim-known ui e2e chromium conformance ts-test fairness chaos-ts large chaos-sealed

## demo: run examples/hello.yaml on an embedded NATS, coordinator and worker
demo: ui
	$(GO) run ./cmd/weft demo examples/hello.yaml

## test: vet, gofmt check, every test with the race detector, the
## TypeScript SDK's tests (ts-test), then the web UI's browser tests (e2e)
test: lint
ifeq ($(RACE),)
	@echo "note: cgo is off (no C compiler?), so tests run without -race" >&2
endif
	$(GO) test $(RACE) -count=1 -timeout 30m ./...
	$(MAKE) ts-test
	$(MAKE) e2e

## ts-test: the TypeScript worker SDK and client (sdk/typescript): npm ci,
## the build (tsc --strict), and its tests against the Go codec, pkg/graph
## and a real engine under Weft's roles (internal/sdkharness), then the
## conformance kit's short cases against its conformance worker
ts-test:
	cd sdk/typescript && npm ci && npm run build && npm test
	$(GO) run ./cmd/weft conformance -short -worker '$(TS_WORKER)'

## lint: go vet and the gofmt check
lint: vet fmt-check

vet:
	$(GO) vet ./...

fmt-check:
	@files="$$($(GOFMT) -l .)"; \
	if [ -n "$$files" ]; then echo "gofmt needed on:"; echo "$$files"; exit 1; fi

## build: the weft, coordinator and nodeworker binaries, in bin/
build: ui
	$(GO) build -o bin/ ./cmd/...

## bench: the benchmark suite, results in bench/results.json
bench:
	@mkdir -p bench
	$(GO) run ./cmd/weftbench -o bench/results.json

## bench-quick: a short run of the benchmark suite
bench-quick:
	@mkdir -p bench
	$(GO) run ./cmd/weftbench -o bench/results.json -quick

## fuzz: every Fuzz test of the module, FUZZTIME (20s) each
fuzz:
	@set -e; for pkg in $$($(GO) list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ./...); do \
		for fn in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "fuzz $$pkg $$fn ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

## chaos: the chaos test at full size: 1,000 runs on a 3-node NATS cluster
## while workers, coordinators and NATS nodes are SIGKILLed (WEFT_CHAOS_RUNS,
## WEFT_CHAOS_SEED and WEFT_CHAOS_LOGS override; see internal/reliability)
chaos:
	WEFT_CHAOS_RUNS=$${WEFT_CHAOS_RUNS:-1000} $(GO) test $(RACE) -v -run '^TestChaos$$' -count=1 -timeout 60m ./internal/reliability/

## chaos-sealed: the chaos test at full size with every process under one
## key ring (encryption at rest), the raw stream grepped for the runs'
## secret at the end (the same variables; `make test` runs 40 runs)
chaos-sealed:
	WEFT_CHAOS_RUNS=$${WEFT_CHAOS_RUNS:-1000} $(GO) test $(RACE) -v -run '^TestChaosSealed$$' -count=1 -timeout 60m ./internal/reliability/

## chaos-ts: the chaos test with a mixed fleet at full size: 1,000 runs
## while TypeScript ledger workers (sdk/typescript, built first when
## needed) serve the ledger node beside a Go one and are SIGKILLed like
## every other process (the same variables; `make test` runs 40 runs)
chaos-ts:
	WEFT_CHAOS_RUNS=$${WEFT_CHAOS_RUNS:-1000} $(GO) test $(RACE) -v -run '^TestChaosTypeScript$$' -count=1 -timeout 60m ./internal/reliability/

## large: a node that outputs 50 MB completes, sealed, under the roles,
## its body kept beside the log (`make test` runs it with 20 MB;
## WEFT_LARGE_MB overrides, up to 60)
large:
	WEFT_LARGE_MB=$${WEFT_LARGE_MB:-50} $(GO) test $(RACE) -v -run '^TestLargeOutputBesideTheLog$$' -count=1 -timeout 15m ./pkg/weft/

## schedkill: a schedule firing every second on a 3-node NATS cluster
## while both coordinators are SIGKILLed, round after round, and a NATS
## node is killed and restarted: one run per fire time
## (internal/reliability; WEFT_SCHEDKILL_ROUNDS overrides; `make test`
## runs one round)
schedkill:
	WEFT_SCHEDKILL_ROUNDS=$${WEFT_SCHEDKILL_ROUNDS:-5} $(GO) test $(RACE) -v -run '^TestScheduleFiresOnceThroughKills$$' -count=1 -timeout 20m ./internal/reliability/

## ownerkill: 500 runs on a 3-node NATS cluster with three partitioned
## coordinators while the holder of a random partition is SIGKILLed again
## and again (WEFT_OWNERKILL_RUNS overrides; `make test` runs 100)
ownerkill:
	WEFT_OWNERKILL_RUNS=$${WEFT_OWNERKILL_RUNS:-500} $(GO) test $(RACE) -v -run TestPartitionOwnersKilledRepeatedly -count=1 -timeout 30m ./internal/reliability/

## agentkill: an agent node's worker SIGKILLed at every step of a scripted
## conversation (each model call, each tool run, after each step) and its
## coordinator mid-loop; `make test` runs one kill point of each kind
agentkill:
	WEFT_AGENTKILL_ALL=1 $(GO) test $(RACE) -v -run TestAgentKilledAtEveryStep -count=1 -timeout 10m ./internal/reliability/

## conformance: the worker conformance kit (docs/conformance.md) against
## every SDK in the repository, each as a separate process: the Go SDK's
## conformance worker, then the TypeScript SDK's when sdk/typescript is
## there (after npm ci && npm run build in it), then CONFORMANCE_WORKER
## if set (a command, e.g. 'python3 -m weft_conformance');
## CONFORMANCE_FLAGS is passed to each (e.g. -short, -run cancel, -v).
## Every SDK runs even when one fails; the target fails if any did.
CONFORMANCE_FLAGS  ?=
CONFORMANCE_WORKER ?=
TS_SDK             := sdk/typescript
TS_WORKER          := node $(TS_SDK)/dist/conformance/worker.js
conformance:
	@mkdir -p bin
	$(GO) build -o bin/weft ./cmd/weft
	$(GO) build -o bin/conf-goworker ./internal/conformance/goworker
	@status=0; \
	echo "== conformance: Go SDK (bin/conf-goworker)"; \
	bin/weft conformance $(CONFORMANCE_FLAGS) -worker bin/conf-goworker || status=1; \
	if [ -f $(TS_SDK)/package.json ]; then \
		echo "== conformance: TypeScript SDK ($(TS_WORKER))"; \
		if (cd $(TS_SDK) && npm ci && npm run build); then \
			bin/weft conformance $(CONFORMANCE_FLAGS) -worker '$(TS_WORKER)' || status=1; \
		else echo "FAIL typescript: npm ci && npm run build in $(TS_SDK) failed"; status=1; fi; \
	fi; \
	if [ -n "$(CONFORMANCE_WORKER)" ]; then \
		echo "== conformance: $(CONFORMANCE_WORKER)"; \
		bin/weft conformance $(CONFORMANCE_FLAGS) -worker '$(CONFORMANCE_WORKER)' || status=1; \
	fi; \
	exit $$status

## fairness: namespace a's client floods run starts for 30 s (WEFT_FAIRNESS_FLOOD
## overrides; `make test` runs 3 s) while namespace b's canary runs are timed
## against the idle system: each flood (pkg/client, then raw requests) prints
## the canary's median and slowest, and the ratio (internal/security)
fairness:
	WEFT_FAIRNESS_FLOOD=$${WEFT_FAIRNESS_FLOOD:-30s} $(GO) test -v -run 'TestNamespaceFairness$$' -count=1 -timeout 15m ./internal/security/

## clean: remove built binaries and weft dev's data
clean:
	rm -rf bin data

## sim: the deterministic simulator over SEEDS seeds (default 200) under
## FAULTS (default all; see internal/sim/faults.go) and GRAPHS (default
## all); SEED=<n> replays one seed. Prints seeds and invariant checks per
## minute, and each invariant that failed with the seeds that show it.
SEEDS  ?= 200
FAULTS ?= all
GRAPHS ?=
sim:
ifdef SEED
	$(GO) test -count=1 -run 'TestSim$$' -v ./internal/sim -args -seed=$(SEED) -faults=$(FAULTS) -graphs=$(GRAPHS)
else
	$(GO) test -count=1 -timeout 60m -run 'TestSim$$' -v ./internal/sim -args -seeds=$(SEEDS) -faults=$(FAULTS) -graphs=$(GRAPHS)
endif

## sim-known: replay each fault class the simulator knows the production
## code fails under (internal/sim knownFailing), with its seed
sim-known:
	$(GO) test -count=1 -run 'TestSim$$' -v ./internal/sim -args -known

## ui: the web UI (web/, vite) built into internal/ui/dist, which weft
## embeds; npm ci first when node_modules is missing or the lockfile changed
ui: web/node_modules/.package-lock.json
	cd web && npm run build

web/node_modules/.package-lock.json: web/package-lock.json
	cd web && npm ci
	@touch $@

## e2e: the web UI's end-to-end tests: weft dev, example runs, and
## Debian's Chromium driven headless by playwright-core (web/e2e);
## screenshots in web/e2e/screenshots
CHROMIUM ?= /usr/bin/chromium
e2e: ui chromium
	cd web && CHROMIUM=$(CHROMIUM) npm run e2e

chromium:
	@if [ ! -x "$(CHROMIUM)" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			echo "installing chromium with apt-get (e2e needs it)"; \
			apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; \
		else \
			echo "make e2e needs Debian's Chromium at $(CHROMIUM): install it with 'sudo apt-get install -y chromium' (or set CHROMIUM=/path/to/chromium)" >&2; \
			exit 1; \
		fi; \
	fi
