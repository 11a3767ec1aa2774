# The Makefile mirrors CI: `make ci` is what .ci/run executes.
CARGO ?= cargo
LISTEN ?= 127.0.0.1:8080
SECURE_LISTEN ?= 127.0.0.1:6443

.PHONY: run deps build test test-deploy lint fmt ci bench clean fuzz chaos

## run: install what is missing, build, and serve TLS on $(SECURE_LISTEN) (and plain
## HTTP, admin for every request, on $(LISTEN)) with an embedded etcd under ./data;
## then: kubectl --kubeconfig data/admin.kubeconfig get ns
run: deps
	$(CARGO) build --release --bin apiserver
	./target/release/apiserver --secure-listen $(SECURE_LISTEN) --listen $(LISTEN) --data-dir ./data

deps:
	./tools/install-deps.sh

build: deps
	$(CARGO) build --workspace --all-targets

## test: every unit, integration and end-to-end test (real etcd, real kubectl),
## then the deployment tests (chart render + lint, hadolint, compose).
## tools/test.sh runs the test binaries TEST_LANES at a time (they mostly wait
## on servers); `cargo test --workspace` runs the same tests one binary at a time.
TEST_LANES ?= 3
test: deps
	./tools/install-test-deps.sh
	$(CARGO) build --bin apiserver
	CRD_MEMORY_CRDS=300 TEST_LANES=$(TEST_LANES) CARGO=$(CARGO) ./tools/test.sh
	$(MAKE) test-deploy

test-deploy:
	./tools/install-test-deps.sh
	$(CARGO) build --bin apiserver
	python3 -m pytest -q -p no:cacheprovider tests/deploy

## monitor: etcd, two replicas and Prometheus with kube-prometheus's rules (README "Monitoring");
## prints the Prometheus URL; Ctrl-C stops everything
.PHONY: monitor
monitor: deps
	./tools/install-test-deps.sh
	$(CARGO) build --bin apiserver
	python3 tools/monitor.py

## lint: formatting, clippy, and the apiserver's import graph: no import circle
## larger than IMPORT_CIRCLE_MAX files (tools/import_graph.py; ARCHITECTURE.md "Floors")
IMPORT_CIRCLE_MAX ?= 7
# Each floor's invariant (ARCHITECTURE.md "Floors"): what it must never import.
FLOOR_RULES = \
	--never registry=handlers,server,admission,controllers,aggregator,auth,audit,flowcontrol,discovery,openapi,metrics,crd,conversion,error,object \
	--never object=handlers,server,admission,controllers,aggregator,crd,conversion \
	--never storage_format=handlers,server,admission,controllers,aggregator,crd,conversion \
	--never crd!=handlers,server,admission,controllers,aggregator,discovery,openapi \
	--never crd::conversion=handlers,server,admission,controllers,aggregator,conversion \
	--never error=handlers,server,admission,controllers,aggregator,crd,conversion,object \
	--never controllers!=admission,aggregator,handlers,state,server \
	--never backend=state,server,handlers,scope,admission,controllers,aggregator,allocator,auth,audit,flowcontrol,limits \
	--never auth=state,server,handlers,scope,admission,aggregator!,aggregator::proxy,allocator,filters \
	--never audit=state,server,handlers,scope,admission,aggregator,allocator,filters \
	--never flowcontrol=state,server,handlers,scope,admission,aggregator,allocator,filters \
	--never limits=state,server,handlers,scope,admission,aggregator,allocator,filters \
	--never metrics=state,server,handlers,scope,admission,aggregator,allocator,filters,backend,auth \
	--never scope=state,server,handlers,admission,controllers,aggregator,allocator \
	--never admission=state,server,handlers,filters \
	--never allocator=state,server,handlers,filters \
	--never aggregator!=state,server,handlers,filters \
	--never aggregator::proxy=state,server,handlers,filters \
	--never openapi=state,server,handlers,filters \
	--never discovery=state,server,handlers,filters \
	--never rbac=state,server,handlers,filters \
	--never response=state,server,handlers,filters \
	--never state=handlers,server,filters \
	--never handlers=server,filters
lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	python3 tools/import_graph.py apiserver/src --max $(IMPORT_CIRCLE_MAX) $(FLOOR_RULES)

fmt:
	$(CARGO) fmt --all

# CI builds once from scratch: incremental caches would only cost disk there.
ci: export CARGO_INCREMENTAL = 0
ci: deps lint test bench-smoke
	@df -h . | tail -1

clean:
	$(CARGO) clean
	rm -rf ./data

## bench: release build, then the issue's full benchmark run (minutes); rewrites the table in BENCHMARKS.md
bench: deps
	$(CARGO) build --release --bin apiserver --bin apiserver-bench
	$(CARGO) run --release --bin apiserver-bench -- --full

## bench-smoke: seconds-long debug run of every benchmark phase (CI); fails only if a phase produced no numbers
.PHONY: bench-smoke
bench-smoke: deps
	$(CARGO) build --bin apiserver --bin apiserver-bench
	$(CARGO) run --bin apiserver-bench -- --smoke

## fuzz: coverage-guided AFL++ run of every fuzz target, FUZZ_SECONDS each (default 120);
## crashes are kept under fuzz/corpus/<target>/ and replayed by `cargo test -p fuzz` (CI)
FUZZ_SECONDS ?= 120
fuzz:
	./tools/fuzz.sh $(FUZZ_SECONDS)

## crd-memory: the full CRD memory test (1,000 CRDs created, updated, deleted; CI runs 300)
.PHONY: crd-memory
crd-memory: deps
	$(CARGO) build --bin apiserver
	CRD_MEMORY_CRDS=1000 $(CARGO) test -p e2e --test crd_row_memory -- --nocapture

## chaos: the long chaos run (CI runs 40 s of it inside `make test`)
CHAOS_SECONDS ?= 600
chaos: deps
	$(CARGO) build --bin apiserver
	CHAOS_SECONDS=$(CHAOS_SECONDS) $(CARGO) test -p e2e --test chaos -- --nocapture
