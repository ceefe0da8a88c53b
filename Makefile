# hns — hierarchical namespaces for Kubernetes.
#   make dev-up     local control plane + hns, ready for kubectl (state in .dev/)
#   make dev-down   stop it
#   make test       unit tests + end-to-end tests against a real control plane
#   make lint       cargo fmt --check and clippy -D warnings

.PHONY: build dev-up dev-down dev-clean test test-unit e2e lint fmt

build:
	cargo build --workspace

dev-up:
	hack/dev-up.sh

dev-down:
	hack/dev-down.sh

dev-clean: dev-down
	rm -rf .dev

test: test-unit e2e

test-unit:
	cargo test --workspace --exclude hns-e2e

e2e:
	hack/e2e.sh

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings

fmt:
	cargo fmt --all
