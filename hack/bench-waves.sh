#!/usr/bin/env bash
# `flotilla render --wave` against a plain render of the same commit, for
# docs/performance.md. Generates a benchmark repo (default L), commits it with a
# RolloutPolicy, then commits one image change, and times, in turn:
#   plain:  render --ref HEAD -o json
#   wave:   render --ref HEAD --wave 1 -o json   (composes HEAD~1's governed objects)
# GOVERN=team (default): one team's Deployments, as a RolloutPolicy usually selects;
# GOVERN=all: a ClusterRolloutPolicy over every Deployment (the most --wave can cost).
# Usage: [FLOTILLA_BIN=...] [GOVERN=team|all] [RUNS=5] hack/bench-waves.sh [SIZE]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla/target}
size=${1:-L} govern=${GOVERN:-team} runs=${RUNS:-5}
cargo build --release -q -p flotilla-core --example generate-repo
bin=${FLOTILLA_BIN:-}
if [ -z "$bin" ]; then cargo build --release -q --bin flotilla -p flotilla; bin=$CARGO_TARGET_DIR/release/flotilla; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
repo=$work/repo
"$CARGO_TARGET_DIR/release/examples/generate-repo" "$size" "$repo"
case $govern in
  team) policy="apiVersion: flotilla.dev/v1alpha1
kind: RolloutPolicy
metadata: {name: team-0, namespace: ns-0}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, labelSelector: {matchLabels: {team: team-0}}}]
  waves: [{name: canary, clusterAffinity: {labelSelector: {matchLabels: {tier: t1}}}}]
  minSuccessTime: 5m" ;;
  all) policy="apiVersion: flotilla.dev/v1alpha1
kind: ClusterRolloutPolicy
metadata: {name: every-deployment}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]
  waves: [{name: canary, clusterAffinity: {labelSelector: {matchLabels: {tier: t1}}}}]
  minSuccessTime: 5m" ;;
  *) echo "bench-waves: GOVERN is team or all" >&2; exit 2 ;;
esac
printf '%s\n' "$policy" > "$repo/rollout.yaml"
git -C "$repo" init -q -b main
git -C "$repo" add -A
git -C "$repo" -c user.name=bench -c user.email=bench@example.invalid commit -qm base
# One image change in a Deployment the policy governs (app-0 is team-0's, in ns-0).
file=$(grep -rl 'name: app-0$' "$repo/apps" | head -n1)
sed -i '0,/image: \(.*\):1\.\([0-9]*\)\.0/s//image: \1:9.\2.0/' "$file"
git -C "$repo" -c user.name=bench -c user.email=bench@example.invalid commit -qam "app-0 image"
"$bin" render "$repo" --ref HEAD --wave 1 -o json > "$work/wave.json" 2>/dev/null
python3 - "$work/wave.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
old = sum(1 for ms in plan["clusters"].values() for m in ms
          if m["metadata"]["name"] == "app-0" and m["kind"] == "Deployment" and ":1." in str(m))
print(f"after wave 1, clusters still running app-0's old image: {old}")
PY
time_one() { python3 - "$@" <<'PY'
import resource, subprocess, sys, time
start = time.perf_counter()
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
print(f"{time.perf_counter() - start:.3f} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.0f}")
PY
}
plain=() wave=()
for _ in $(seq "$runs"); do
  plain+=("$(time_one "$bin" render "$repo" --ref HEAD -o json)")
  wave+=("$(time_one "$bin" render "$repo" --ref HEAD --wave 1 -o json)")
done
python3 - "$size" "$govern" "${plain[@]}" -- "${wave[@]}" <<'PY'
import statistics, sys
size, govern, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
cut = rest.index("--")
plain = [tuple(map(float, r.split())) for r in rest[:cut]]
wave = [tuple(map(float, r.split())) for r in rest[cut + 1:]]
p, w = statistics.median(t for t, _ in plain), statistics.median(t for t, _ in wave)
pm, wm = max(m for _, m in plain), max(m for _, m in wave)
print(f"{size} govern={govern}: plain render {p:.3f} s ({pm:.0f} MiB), --wave 1 {w:.3f} s ({wm:.0f} MiB): {w / p:.2f}x time, {wm / pm:.2f}x memory ({len(plain)} runs each, in turn)")
PY
