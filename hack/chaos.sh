#!/usr/bin/env bash
# The fault-injection soak: five real clusters (four members, one Pull; a host for the
# Leases), the git daemon, two leader-elected controllers and a Pull agent, under a
# seeded schedule of faults while commits keep coming. Invariants are read from the
# members, their audit logs and the served repository (tests/it/chaos/).
#
#   hack/chaos.sh [--duration 120s] [--seed 7] [--report FILE]
#
# Prints each fault and its recovery, then the figures; the last line is
# `faults: N, violations: M`. Exits 1 on any violation. Installs what it needs as
# hack/test.sh does.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=120 seed=7 report=
while [ $# -gt 0 ]; do
  case $1 in
    --duration) duration=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --report) report=$2; shift 2 ;;
    *) echo "chaos.sh: unknown argument '$1' (try --duration 120s, --seed 7, --report FILE)" >&2; exit 2 ;;
  esac
done
case $duration in
  *h) duration=$(( ${duration%h} * 3600 )) ;;
  *m) duration=$(( ${duration%m} * 60 )) ;;
  *s) duration=${duration%s} ;;
esac
[[ "$duration" =~ ^[0-9]+$ && "$seed" =~ ^[0-9]+$ ]] || { echo "chaos.sh: --duration takes 90, 90s, 10m or 1h; --seed a number" >&2; exit 2; }
say() { printf "\n== %s\n" "$*" >&2; }
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla/target}
# shellcheck source=hack/lib/test-deps.sh
source hack/lib/test-deps.sh

out=$(mktemp -d) status=1
# The processes' logs are kept when the soak fails, so a violation can be read.
trap 'if [ "$status" = 0 ]; then rm -rf "$out"; fi' EXIT
export FLOTILLA_CHAOS_DURATION=$duration FLOTILLA_CHAOS_SEED=$seed FLOTILLA_CHAOS_REPORT=${report:-$out/report.json}
export FLOTILLA_CHAOS_DIR=${FLOTILLA_CHAOS_DIR:-$out/run}
status=0
cargo test --test it chaos::soak -- --exact --nocapture 2>&1 | tee "$out/log" >&2 || status=$?
line=$(grep -E '^faults: [0-9]+, violations: [0-9]+$' "$out/log" | tail -1 || true)
if [ -z "$line" ]; then
  status=1
  echo "chaos.sh: the soak did not finish; processes' logs are in $FLOTILLA_CHAOS_DIR" >&2
  echo "faults: 0, violations: 1"
  exit 1
fi
echo "$line"
if [ "$status" != 0 ]; then echo "chaos.sh: processes' logs are in $FLOTILLA_CHAOS_DIR" >&2; fi
exit "$status"
