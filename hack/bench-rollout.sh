#!/usr/bin/env bash
# Rollout figures for docs/performance.md: commits on three real members, each moving
# through a canary wave (20 s soak) and the rest, timed from the members themselves
# (tests/it/rollouts.rs). Prints push → canary and soak end → next wave applied, each
# with p50 and p99 over the trials.
# Usage: [FLOTILLA_BENCH_TRIALS=20] hack/bench-rollout.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla/target}
say() { printf '\n== %s\n' "$*" >&2; }
# shellcheck source=hack/lib/test-deps.sh
source hack/lib/test-deps.sh
export FLOTILLA_BENCH_TRIALS=${FLOTILLA_BENCH_TRIALS:-20}
cargo test --test it rollouts::a_commit_reaches_the_canary_first_and_the_rest_after_its_soak -- --exact --nocapture 2>&1 | grep '^rollout:'
