#!/usr/bin/env bash
# Failover: member2's API server goes away under a Deployment of 9 replicas divided
# 1:1:1 over three real members, opted in with purgeMode Gracefully and a 10 s toleration;
# the time from the outage to 9 ready replicas on member1 + member3, p50 over
# FLOTILLA_BENCH_TRIALS (default 5) trials of each outage, interleaved: killed (SIGKILL,
# connections refused) and frozen (SIGSTOP, connections accepted and never answered).
# Each trial ends with member2's return and a reschedule. Exits non-zero when the frozen
# p50 is more than 5 s above the killed one (a frozen member must not cost more).
# hack/build-tools.sh builds the member binaries on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla/target}
bash hack/build-tools.sh >/dev/null
out=$(FLOTILLA_BENCH_TRIALS=${FLOTILLA_BENCH_TRIALS:-5} cargo test --test it -- --nocapture --exact \
  failover::a_stopped_member_s_replicas_run_elsewhere_and_nothing_is_lost_when_it_returns 2>&1 |
  grep -E "^failover:|test result|panicked" || true)
echo "$out"
killed=$(sed -nE 's/^failover: member2 killed .* p50 ([0-9.]+) s.*/\1/p' <<<"$out")
frozen=$(sed -nE 's/^failover: member2 frozen .* p50 ([0-9.]+) s.*/\1/p' <<<"$out")
[ -n "$killed" ] && [ -n "$frozen" ] || { echo "bench-failover: the test did not finish" >&2; exit 1; }
awk -v k="$killed" -v f="$frozen" 'BEGIN {
  printf "failover: frozen p50 %.1f s against killed p50 %.1f s (difference %+.1f s; bound +5 s)\n", f, k, f - k
  exit (f - k > 5) ? 1 : 0 }'
