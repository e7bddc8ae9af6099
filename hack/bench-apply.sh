#!/usr/bin/env bash
# flotilla apply against `kubectl apply --server-side` on the same three fresh member
# clusters: N objects (default 1000: ConfigMaps and Services) into every member, then a
# no-op run of each. Reports wall time and API requests (from the audit log, which here
# records every request). Needs kubectl. Usage: hack/bench-apply.sh [N]
#   FLOTILLA_BIN=/path/to/flotilla      that binary, no build
#   FLOTILLA_COMPARE=/path/to/flotilla  also apply with a second binary (own namespace and instance,
#                                       right after the first), to compare two builds on
#                                       the same members in one run
set -euo pipefail
cd "$(dirname "$0")/.."
# The target directory the other scripts and CI share (a cold release build takes ten minutes).
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla/target}
n=${1:-1000}
command -v kubectl >/dev/null || {
  echo "bench-apply: kubectl is required: hack/build-tools.sh peers builds it into ~/.cache/flotilla/bin (put that on PATH)" >&2
  exit 1
}
if [ -z "${FLOTILLA_BIN:-}" ]; then cargo build --release -q --bin flotilla; fi
flotilla=${FLOTILLA_BIN:-$CARGO_TARGET_DIR/release/flotilla}
compare=${FLOTILLA_COMPARE:-}
work=$(mktemp -d)
export FLOTILLA_CLUSTERS_DIR=$work/clusters KUBECONFIG_OUT=$work/members.config
export FLOTILLA_AUDIT_POLICY=$PWD/hack/audit-policy-admin.yaml
trap 'hack/local-down.sh >/dev/null 2>&1; rm -rf "$work"' EXIT
hack/local-up.sh 3 >/dev/null 2>&1

# repo NAMESPACE DIR: three members, a namespace, N/2 ConfigMaps and N/2 Services on all.
repo() {
  local ns=$1 dir=$2
  mkdir -p "$dir"
  {
    for m in 1 2 3; do printf -- '---\napiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {name: member%s}\nspec: {syncMode: Push}\n' "$m"; done
    printf -- '---\napiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n' "$ns"
    printf -- '---\napiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: all, namespace: %s}\nspec:\n  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}, {apiVersion: v1, kind: Service}]\n' "$ns"
    for i in $(seq 1 $((n / 2))); do
      printf -- '---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-%s, namespace: %s, labels: {app: bench}}\ndata: {index: "%s", mode: production, region: local}\n' "$i" "$ns" "$i"
      printf -- '---\napiVersion: v1\nkind: Service\nmetadata: {name: svc-%s, namespace: %s}\nspec:\n  selector: {app: a%s}\n  ports: [{name: http, port: 80, targetPort: 8080}]\n' "$i" "$ns" "$i"
    done
  } >"$dir/fleet.yaml"
}
requests() { cat "$FLOTILLA_CLUSTERS_DIR"/member*/audit.log | grep -c '"username":"admin"' || true; }
# CPU seconds (user + system) the members' processes (etcd, API servers, …) have used.
members_cpu() {
  local ticks=0 pid
  while read -r pid _; do
    [ -r "/proc/$pid/stat" ] && ticks=$((ticks + $(awk '{ print $14 + $15 }' "/proc/$pid/stat")))
  done <"$FLOTILLA_CLUSTERS_DIR/pids"
  echo "$ticks / $(getconf CLK_TCK)"
}
# CPU seconds of waited-for children in a file `times` wrote (its second line). `times`
# must run in the measuring shell: in a $(…) subshell it would count that one's children.
children_cpu() { tail -1 "$1" | sed -E 's/([0-9]+)m([0-9.]+)s/(\1*60+\2)/g; s/ /+/'; }
# measure CMD...: prints "seconds requests client-cpu-seconds members-cpu-seconds". The
# client's CPU (the command's own, user + system) against the members' shows where the
# wall time goes: on two cores, three API servers and etcd are most of it.
measure() {
  local before after start end mcpu0 mcpu1
  before=$(requests); mcpu0=$(members_cpu); times >"$work/times0"; start=$(date +%s.%N)
  "$@" >/dev/null 2>&1
  end=$(date +%s.%N); times >"$work/times1"; mcpu1=$(members_cpu); sleep 1; after=$(requests)
  python3 -c "print(f'{$end - $start:.2f} $((after - before)) \
{($(children_cpu "$work/times1")) - ($(children_cpu "$work/times0")):.2f} {($mcpu1) - ($mcpu0):.1f}')"
}

repo bench-flotilla "$work/flotilla"
repo bench-kubectl "$work/kubectl"
[ -z "$compare" ] || repo bench-compare "$work/compare"
"$flotilla" render "$work/kubectl" --out-dir "$work/kubectl-out" >/dev/null
kubectl_apply() {
  for m in 1 2 3; do
    kubectl --kubeconfig "$KUBECONFIG_OUT" --context "member$m" apply --server-side --force-conflicts -R -f "$work/kubectl-out/member$m" &
  done
  wait
}
flotilla_apply() { "$flotilla" apply "$work/flotilla" --kubeconfig "$KUBECONFIG_OUT"; }
compare_apply() { "$compare" apply "$work/compare" --kubeconfig "$KUBECONFIG_OUT" --instance compare; }
read -r ft fr fc fm <<<"$(measure flotilla_apply)"
[ -z "$compare" ] || read -r ct cr cc cm <<<"$(measure compare_apply)"
read -r kt kr kc km <<<"$(measure kubectl_apply)"
read -r fnt fnr fnc fnm <<<"$(measure flotilla_apply)"
[ -z "$compare" ] || read -r cnt cnr cnc cnm <<<"$(measure compare_apply)"
read -r knt knr knc knm <<<"$(measure kubectl_apply)"
printf '%-36s %8s %9s %11s %12s\n' "$n objects x 3 clusters" seconds requests "client CPU" "members CPU"
printf '%-36s %8s %9s %11s %12s\n' "flotilla apply (first)" "$ft" "$fr" "$fc" "$fm"
printf '%-36s %8s %9s %11s %12s\n' "kubectl apply --server-side" "$kt" "$kr" "$kc" "$km"
printf '%-36s %8s %9s %11s %12s\n' "flotilla apply (no-op)" "$fnt" "$fnr" "$fnc" "$fnm"
printf '%-36s %8s %9s %11s %12s\n' "kubectl apply --server-side (no-op)" "$knt" "$knr" "$knc" "$knm"
if [ -n "$compare" ]; then
  printf '%-36s %8s %9s %11s %12s\n' "compared binary (first)" "$ct" "$cr" "$cc" "$cm"
  printf '%-36s %8s %9s %11s %12s\n' "compared binary (no-op)" "$cnt" "$cnr" "$cnc" "$cnm"
fi
