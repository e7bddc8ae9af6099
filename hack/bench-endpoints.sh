#!/usr/bin/env bash
# Multi-cluster Services: a pod becoming ready in a provider member (its own
# EndpointSlice, written by kube-controller-manager) → the address in the consumer's
# imported slice, p50/p99 over 50 pods, with the controller in release mode and three
# real members; and the consumer writes each provider slice update cost (from the
# members' audit logs). hack/build-tools.sh builds the member binaries on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla/target}
bash hack/build-tools.sh >/dev/null
FLOTILLA_BENCH_CHANGES=${FLOTILLA_BENCH_CHANGES:-50} cargo test --release --test it -- --nocapture --exact \
  services::a_cross_cluster_service_carries_the_providers_endpoints_to_its_consumer 2>&1 |
  grep -E "^endpoints:|test result|panicked"
