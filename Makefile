# The Makefile mirrors CI: `make ci` is what .ci/run executes.
CARGO ?= cargo
LISTEN ?= 127.0.0.1:8080

.PHONY: run deps build test lint fmt ci bench clean

## run: install what is missing, build, and serve on $(LISTEN) with an embedded etcd under ./data
run: deps
	$(CARGO) build --release --bin apiserver
	./target/release/apiserver --listen $(LISTEN) --data-dir ./data

deps:
	./tools/install-deps.sh

build: deps
	$(CARGO) build --workspace --all-targets

## test: every unit, integration and end-to-end test (real etcd, real kubectl)
test: deps
	$(CARGO) build --bin apiserver
	$(CARGO) test --workspace --no-fail-fast

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

ci: deps lint test

clean:
	$(CARGO) clean
	rm -rf ./data
