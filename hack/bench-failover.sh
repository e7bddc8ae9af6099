#!/usr/bin/env bash
# Failover: member2's API server stops (SIGSTOP) under a Deployment of 9 replicas divided
# 1:1:1 over three real members, opted in with purgeMode Gracefully and a 10 s toleration;
# the time from the stop to 9 ready replicas on member1 + member3, p50 over 10 trials
# (FLOTILLA_BENCH_TRIALS), each followed by member2's return and a reschedule.
# hack/build-tools.sh builds the member binaries on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla/target}
bash hack/build-tools.sh >/dev/null
FLOTILLA_BENCH_TRIALS=${FLOTILLA_BENCH_TRIALS:-10} cargo test --test it -- --nocapture --exact \
  failover::a_stopped_member_s_replicas_run_elsewhere_and_nothing_is_lost_when_it_returns 2>&1 |
  grep -E "^failover:|test result|panicked"
