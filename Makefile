# hns — hierarchical namespaces for Kubernetes.
#   make dev-up     local control plane + hns, ready for kubectl (state in .dev/)
#   make dev-down   stop it
#   make test       unit tests + end-to-end tests against a real control plane
#   make lint       cargo fmt --check and clippy -D warnings

.PHONY: bench build dev-up dev-down dev-clean test test-unit e2e lint fmt manifests verify-manifests

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

# Benchmarks print figures and ratios against a baseline measured in the same run.
bench:
	hack/bench.sh

lint: verify-manifests
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings

# deploy/hns.yaml is rendered from config/default; CI checks it is current.
manifests:
	kubectl kustomize config/default > deploy/hns.yaml
	kubectl kustomize config/cert-manager > deploy/hns-cert-manager.yaml

verify-manifests:
	@kubectl kustomize config/default | diff -u deploy/hns.yaml - \
	  || { echo "deploy/hns.yaml is stale: run make manifests"; exit 1; }
	@kubectl kustomize config/cert-manager | diff -u deploy/hns-cert-manager.yaml - \
	  || { echo "deploy/hns-cert-manager.yaml is stale: run make manifests"; exit 1; }

fmt:
	cargo fmt --all
