#!/usr/bin/env bash
# Prints deploy/hns-prometheusrule.yaml: hns's alerts (config/prometheus/hns-rules.yaml, the one
# source, which promtool checks and tests) as a PrometheusRule for the Prometheus Operator.
# `make manifests` writes it; `make verify-manifests` fails when it is stale.
set -euo pipefail
rules="$(dirname "$0")/../config/prometheus/hns-rules.yaml"
cat <<'YAML'
# Generated from config/prometheus/hns-rules.yaml by `make manifests`; do not edit.
# Runbooks: docs/runbooks.md. A Prometheus Operator picks it up when its ruleSelector matches
# (kube-prometheus-stack's wants `release: <its release name>`: kubectl label it so).
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: hns
  namespace: hns-system
  labels:
    app.kubernetes.io/name: hns
spec:
YAML
# The rule file's own header comment stays behind; everything else moves under spec.
sed -e '/^#/d' -e 's/^\(.\)/  \1/' "$rules"
