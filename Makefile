# hns — hierarchical namespaces for Kubernetes.
#   make dev-up     local control plane + hns, ready for kubectl (state in .dev/)
#   make dev-up-nodes  the same control plane with 2 real nodes (kubelet, containerd, kube-proxy), hns installed from deploy/hns.yaml (root)
#   make dev-down   stop it (either)
#   make test       unit tests, end-to-end tests, the HNC migration test, the short reliability suites against a real control plane, and availability-short (root)
#   make lint       cargo fmt --check and clippy -D warnings, manifests up to date, the alerts checked and tested by promtool
#   make rules      promtool check rules and test rules on config/prometheus (part of make lint)
#   make audit      cargo deny: licences, bans, sources, advisories (deny.toml); part of make lint
#   make reliability        bad input, auth matrix, load, faults, outage safety: a table of figures
#   make reliability-short  the same, minutes long (CI runs it)
#   make bench      benchmarks, each against a baseline measured in the same run
#   make bench-scale  hns at 100,000 namespaces (most of an hour; not in CI)
#   make release    the release folder target/dist/vVERSION: plugin archive (and its sha256 in the krew manifest), image, manifests pinned by digest, alerts, SBOMs, SHA256SUMS
#   make image      the hns-apiserver image as an OCI archive in target/image/, reproducible, without docker
#   make availability       hns from deploy/hns.yaml on 2 real nodes: e2e in-cluster, a lost node diagnosed, rollouts, drains, kills and node loss under load (root)
#   make availability-short the same, CI-sized

.PHONY: reliability reliability-short availability availability-short bench bench-scale build dev-up dev-up-nodes dev-down dev-clean test test-unit e2e migration-test lint rules audit fmt manifests verify-manifests release image

build:
	cargo build --workspace

dev-up:
	hack/dev-up.sh

# The control plane with real nodes on this machine (HNS_NODES, default 2; hack/nodes.sh), hns
# installed with `kubectl apply -f deploy/hns.yaml`, its image (make image) imported into every
# node's containerd. State in .dev/nodes-cluster/.
dev-up-nodes:
	hack/dev-up-nodes.sh

dev-down:
	hack/dev-down.sh

dev-clean: dev-down
	rm -rf .dev

test: test-unit e2e migration-test reliability-short availability-short

test-unit:
	cargo test --workspace --exclude hns-e2e

e2e:
	hack/e2e.sh

# docs/migration.md's steps, run as written: HNC v1.1 (built from the Go module proxy, cached in
# ~/.cache/hns/hnc) on a fresh control plane, then hns, then HNC again; nothing may be lost.
migration-test:
	hack/migration-test.sh

# Reliability suites against a fresh control plane with two hns replicas; a figure that misses
# its target fails the run.
reliability:
	hack/reliability.sh

reliability-short:
	hack/reliability.sh --short

# hns as users install it: the image (make image) on a throw-away cluster of two real nodes
# (hack/nodes.sh), installed from deploy/hns.yaml; the e2e suites against it, the diagnosis of
# pods on a really lost node, and the availability scenarios under a steady load (a rollout
# restart, an image upgrade from the previous commit, a drain, SIGKILL of the leader, both
# replicas deleted, a node lost). A figure that misses its target fails the run. Needs root.
availability:
	hack/availability.sh

availability-short:
	hack/availability.sh --short

# Benchmarks print figures and ratios against a baseline measured in the same run; the last,
# hnc, against HNC v1.1 itself (built from the Go module proxy) on a cluster of its own.
bench:
	hack/bench.sh

# 100,000 namespaces (HNS_BENCH_SCALE_NAMESPACES): creation, memory, reads, tree -A,
# propagation, a move and a restart at that size; tests/src/scale_bench.rs says what is measured.
bench-scale:
	hack/bench.sh scale

# A release's folder (hack/release.sh says what is in it). The krew archive is for this machine's
# platform (linux/amd64 here): kubectl-hns and its README at the top level, as
# deploy/krew/hns.yaml maps them; its sha256 is written into that platform's entry of the
# manifest. The completer kubectl runs for `kubectl hns <TAB>`, kubectl_complete-hns,
# is kubectl-hns itself under that name: krew refuses symbolic links in archives and links only
# `bin`, so users make the link (the manifest's caveats and plugin/README.md say how).
release:
	hack/release.sh

# The image deploy/hns.yaml runs (hns-apiserver:v0.1.0) from the release binary, without a daemon,
# a registry or a base image: target/image/hns-apiserver.oci.tar, its digest and reference beside
# it. The same commit gives the same digest (hack/build-image.sh says how).
image:
	hack/build-image.sh

lint: verify-manifests audit rules
	hack/check-layers.sh
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings

# Supply-chain policy in deny.toml; cargo-deny is built once and cached in $HNS_CACHE. RustSec
# advisories come from $HNS_ADVISORY_DB, else ../shared/advisory-db when present, else github.com.
audit:
	hack/cargo-deny.sh

# deploy/hns.yaml is rendered from config/default; CI checks it is current. The chart (charts/hns)
# is written by hand; tests/tests/helm.rs checks that its default render is deploy/hns.yaml.
manifests:
	kubectl kustomize config/default > deploy/hns.yaml
	kubectl kustomize config/cert-manager > deploy/hns-cert-manager.yaml
	hack/prometheusrule.sh > deploy/hns-prometheusrule.yaml
	cp config/prometheus/hns-rules.yaml charts/hns/files/hns-rules.yaml

verify-manifests:
	@kubectl kustomize config/default | diff -u deploy/hns.yaml - \
	  || { echo "deploy/hns.yaml is stale: run make manifests"; exit 1; }
	@kubectl kustomize config/cert-manager | diff -u deploy/hns-cert-manager.yaml - \
	  || { echo "deploy/hns-cert-manager.yaml is stale: run make manifests"; exit 1; }
	@hack/prometheusrule.sh | diff -u deploy/hns-prometheusrule.yaml - \
	  || { echo "deploy/hns-prometheusrule.yaml is stale: run make manifests"; exit 1; }
	@diff -u charts/hns/files/hns-rules.yaml config/prometheus/hns-rules.yaml \
	  || { echo "charts/hns/files/hns-rules.yaml is stale: run make manifests"; exit 1; }

# hns's alerts (config/prometheus), checked and unit-tested by promtool, built from the Go proxy.
rules:
	hack/check-rules.sh

fmt:
	cargo fmt --all
