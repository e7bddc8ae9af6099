#!/usr/bin/env bash
# flotilla and its peers measured side by side, on this machine (docs/performance.md,
# "Peers side by side"). Builds what it needs first: the release flotilla and, from
# their Go modules (hack/build-tools.sh peers), kubectl, Flux's source-, kustomize- and
# notification-controller, and kustomize.
#
#   hack/bench-peers.sh apply [OBJECTS...]   flotilla against Flux on the same four real
#                                            clusters (default 100 1000 objects per
#                                            member; see hack/bench-peers.py)
#   hack/bench-peers.sh render [SIZE...]     `flotilla render` against `kustomize build`
#                                            of equivalent per-cluster overlays
#                                            (default M L), outputs checked equal
#   hack/bench-peers.sh                      both, with the defaults
# Environment: COMMITS, RESYNCS, SIDES (apply), RUNS (render, default 3).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla/target}
say() { printf '\n== %s\n' "$*" >&2; }
for tool in python3 openssl git curl; do
  command -v "$tool" >/dev/null || { echo "bench-peers: $tool is required (Debian: apt-get install $tool)" >&2; exit 2; }
done
what=${1:-all}
[ $# -gt 0 ] && shift
case "$what" in apply | render | all) ;; *) sed -n '2,15p' "$0" >&2; exit 2 ;; esac

say "building flotilla (release) and the peers"
cargo build --release -q --bin flotilla
cargo build --release -q -p flotilla-core --example kustomize-overlays
export FLOTILLA_BIN=$CARGO_TARGET_DIR/release/flotilla
FLOTILLA_TOOLS_BIN=$(hack/build-tools.sh peers)
export FLOTILLA_TOOLS_BIN

apply() {
  say "apply: flotilla against Flux, ${*:-100 1000} objects per member"
  python3 hack/bench-peers.py apply "$@"
}

# seconds CMD...: wall time of one run, output discarded.
seconds() {
  local start end
  start=$(date +%s.%N)
  "$@" >/dev/null
  end=$(date +%s.%N)
  python3 -c "print(f'{$end - $start:.2f}')"
}

render() {
  local runs=${RUNS:-3} work sizes=("$@")
  [ ${#sizes[@]} -gt 0 ] || sizes=(M L)
  work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  for size in "${sizes[@]}"; do
    say "render: $size, flotilla render against kustomize build of every cluster's overlay"
    "$CARGO_TARGET_DIR/release/examples/kustomize-overlays" write "$size" "$work/$size"
    local clusters=("$work/$size"/kustomize/clusters/*)
    # kustomize builds one overlay per process; two at a time, as flotilla uses both cores.
    build_all() {
      printf '%s\n' "${clusters[@]}" | xargs -P 2 -I{} sh -c '"$0" build "$1" > "$2/$(basename "$1").yaml"' \
        "$FLOTILLA_TOOLS_BIN/kustomize" {} "$work/$size/built"
    }
    mkdir -p "$work/$size/built"
    # The first timed pass of kustomize writes the overlays' output the check reads
    # (eight minutes at L: it is not run a fourth time just to be checked).
    local k f
    k=$(seconds build_all)
    "$FLOTILLA_BIN" render "$work/$size/repo" -o json >"$work/$size/render.json"
    "$CARGO_TARGET_DIR/release/examples/kustomize-overlays" check "$work/$size/render.json" "$work/$size/built"
    for run in $(seq 1 "$runs"); do
      f=$(seconds "$FLOTILLA_BIN" render "$work/$size/repo")
      [ "$run" = 1 ] || k=$(seconds build_all)
      printf 'render %s run %s: flotilla render %s s, kustomize build (%s overlays) %s s, ratio %s\n' "$size" "$run" "$f" \
        "${#clusters[@]}" "$k" "$(python3 -c "print(f'{$k / $f:.1f}')")"
    done
  done
}

case "$what" in
  apply) apply "$@" ;;
  render) render "$@" ;;
  all) render; apply ;;
esac
