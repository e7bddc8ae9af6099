#!/usr/bin/env bash
# End-to-end render figures for docs/performance.md: generates the S, M and L benchmark
# repos and times the release CLI on each (`validate`: load + plan; `render -o json`:
# plus writing every manifest), with peak RSS. Usage: hack/bench-render.sh [SIZE...]
set -euo pipefail
cd "$(dirname "$0")/.."
# The target directory the other scripts and CI share (a cold release build takes ten minutes).
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla/target}
sizes=("${@:-S M L}")
cargo build --release -q -p flotilla-core --example generate-repo
target=$CARGO_TARGET_DIR
bin=${FLOTILLA_BIN:-}
if [ -z "$bin" ]; then cargo build --release -q --bin flotilla -p flotilla; bin=$target/release/flotilla; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# measure CMD...: "<seconds> <peak RSS MiB>" of one run, output discarded.
measure() {
  python3 - "$@" <<'PY'
import resource, subprocess, sys, time
start = time.perf_counter()
code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
elapsed = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(f"{elapsed:.2f} {peak:.0f} exit={code}")
PY
}
printf '%-4s %10s %12s %14s %14s %16s %16s\n' size templates "repo MiB" "validate s" "validate MiB" "render-json s" "render-json MiB"
for size in ${sizes[*]}; do
  "$target/release/examples/generate-repo" "$size" "$work/$size"
  mib=$(du -sm "$work/$size" | cut -f1)
  templates=$(grep -rh '^kind: \(Deployment\|Service\|ConfigMap\)$' "$work/$size/apps" | wc -l)
  read -r vs vm _ <<<"$(measure "$bin" validate "$work/$size")"
  read -r rs rm _ <<<"$(measure "$bin" render "$work/$size" -o json)"
  printf '%-4s %10s %12s %14s %14s %16s %16s\n' "$size" "$templates" "$mib" "$vs" "$vm" "$rs" "$rm"
done
