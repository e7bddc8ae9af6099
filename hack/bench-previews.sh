#!/usr/bin/env bash
# Webhook → plan comment on a real Gitea: p50/p99 over 20 pushes to one pull request,
# with the controller in release mode and three real members (hack/build-tools.sh builds
# Gitea and the member binaries on first use). Prints the end-to-end figures (from
# `git push` returning to the comment naming the new head) and flotilla's own share
# (from the delivery to the comment and statuses posted, from the controller's log).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla/target}
bash hack/build-tools.sh >/dev/null
log=$(mktemp)
trap 'rm -f "$log"' EXIT
FLOTILLA_BENCH_PUSHES=20 FLOTILLA_TEST_LOG=$log cargo test --release --test it -- --nocapture --exact previews::every_push_is_planned_from_its_webhook_alone 2>&1 |
  grep -E "webhook → comment|test result|panicked"
# The last 20 plans are the measured pushes.
sed 's/\x1b\[[0-9;]*m//g' "$log" | grep "plan posted" | tail -n 20 | sed -nE 's/.* took=([0-9.]+)(m?s).*/\1 \2/p' |
  awk '{ v = ($2 == "ms") ? $1 / 1000 : $1; print v }' | sort -n |
  awk '{ a[NR] = $1 } END { i50 = int(NR * 0.5 + 0.999); i99 = int(NR * 0.99 + 0.999);
         printf "flotilla share (delivery → comment and statuses posted) over %d: p50 %.3fs, p99 %.3fs\n", NR, a[i50], a[i99] }'
