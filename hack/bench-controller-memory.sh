#!/usr/bin/env bash
# The controller's memory at scale, members reachable: `flotilla run` follows a
# generated repo (default M: 5,000 templates over 20 clusters) applied to as many real
# members (hack/local-up.sh), with a commit that changes one ConfigMap every
# COMMIT_EVERY seconds (default 30), for SECONDS (default 1800). Every 5 s it samples the
# process's VmRSS, RssAnon and VmHWM (the peak), and prints a line per minute and a
# summary: steady = the median RSS after the first full apply, peak = VmHWM.
#
# Usage: hack/bench-controller-memory.sh [SIZE] [SECONDS]
#   FLOTILLA_BIN         the binary (default: cargo build --release)
#   MALLOC_ARENA_MAX     glibc arenas for the controller (default 2, as deploy/ sets it)
#   MEMBERS_KUBECONFIG   members already up and empty (contexts member1..memberN; each run
#                        applies a new repo path, which an earlier run's inventories refuse),
#                        else fresh members are started here
#   UNREACHABLE=1        no members: every cluster's context points at a closed port on
#                        127.0.0.1 (connection refused), so the controller renders and
#                        every member's worker fails and retries; reports RSS at 90 s and
#                        the median after 90 s (issue 30's figure), and no apply is expected
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-M}
seconds=${2:-1800}
every=${COMMIT_EVERY:-30}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla/target}
work=$(mktemp -d)
trap 'kill "${pid:-}" 2>/dev/null || true; [ -n "${started:-}" ] && FLOTILLA_CLUSTERS_DIR=$work/clusters hack/local-down.sh >/dev/null 2>&1; rm -rf "$work"' EXIT
cargo build --release -q -p flotilla-core --example generate-repo
bin=${FLOTILLA_BIN:-}
if [ -z "$bin" ]; then cargo build --release -q; bin=$CARGO_TARGET_DIR/release/flotilla; fi
"$CARGO_TARGET_DIR/release/examples/generate-repo" "$size" "$work/repo"
# The generated templates live in namespaces the repo does not declare (the render
# benchmarks do not need them); members do, or every object fails to apply.
grep -rh '^  namespace: ' "$work/repo/apps" | sort -u | awk '{ printf "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", $2 }' >"$work/repo/namespaces.yaml"
clusters=$(grep -l "kind: Cluster" -r "$work/repo" | xargs grep -h "^  name: c" | wc -l)
members=${MEMBERS_KUBECONFIG:-}
if [ -n "${UNREACHABLE:-}" ]; then
  # A port that was free a moment ago: nothing listens there.
  closed=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  python3 - "$clusters" "$closed" "$work/unreachable.config" <<'PY'
import json, sys
n, port, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
names = ["member%d" % (i + 1) for i in range(n)]
json.dump({"apiVersion": "v1", "kind": "Config",
           "clusters": [{"name": m, "cluster": {"server": "https://127.0.0.1:%s" % port}} for m in names],
           "users": [{"name": m, "user": {"token": "unused"}} for m in names],
           "contexts": [{"name": m, "context": {"cluster": m, "user": m}} for m in names]}, open(out, "w"))
PY
  members=$work/unreachable.config
fi
if [ -z "$members" ]; then
  started=1
  FLOTILLA_CLUSTERS_DIR=$work/clusters KUBECONFIG_OUT=$work/members.config hack/local-up.sh "$clusters" >&2
  members=$work/members.config
fi
# The generated clusters are c0..c(N-1); the members' contexts member1..memberN.
python3 - "$members" "$work/kubeconfig" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
open(sys.argv[2], "w").write(re.sub(r"\bmember(\d+)\b", lambda m: "c%d" % (int(m.group(1)) - 1), text))
PY
git -C "$work/repo" init -q -b main
git -C "$work/repo" add -A
git -C "$work/repo" -c user.name=bench -c user.email=bench@example.invalid commit -qm "$size"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX:-2} RUST_LOG=warn "$bin" run --repo "$work/repo" --kubeconfig "$work/kubeconfig" --instance memory \
  --listen "127.0.0.1:$port" --interval 5 --resync 5m --cache-dir "$work/cache" 2>"$work/log" &
pid=$!
# The applied revision, once every cluster's last reconcile failed nothing (an object
# that fails to apply holds less memory than one applied: a run with failures measures
# the wrong thing).
applied() {
  curl -sf "http://127.0.0.1:$port/status" | python3 -c '
import json, re, sys
s = json.load(sys.stdin)
failed = sum(int(m.group(1)) for line in s.get("clusters", {}).values() for m in [re.search(r"(\d+) failed", line)] if m)
print(s.get("applied") or "" if failed == 0 and s.get("clusters") else "")' 2>/dev/null || true
}
failures() {
  curl -sf "http://127.0.0.1:$port/status" | python3 -c '
import json, sys
for name, line in sorted(json.load(sys.stdin).get("clusters", {}).items()):
    if " 0 failed" not in line: print(name, line)' 2>/dev/null || true
}
kib() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$pid/status"; }
start=$(date +%s); first=""; last_commit=$start; n=0
: >"$work/samples"
while [ $(( $(date +%s) - start )) -lt "$seconds" ]; do
  kill -0 "$pid" 2>/dev/null || { echo "the controller died:" >&2; tail -20 "$work/log" >&2; exit 1; }
  now=$(date +%s)
  if [ -z "$first" ] && [ -n "$(applied)" ]; then first=$(( now - start )); echo "first full apply after ${first}s" >&2; fi
  if [ -n "$first" ] && [ $(( now - last_commit )) -ge "$every" ]; then
    n=$((n + 1)); last_commit=$now
    sed -i "s/^  owner: .*/  owner: bench-$n/" "$(grep -rl 'kind: ConfigMap' "$work/repo/apps" | head -1)"
    git -C "$work/repo" -c user.name=bench -c user.email=bench@example.invalid commit -qam "change $n"
  fi
  echo "$(( now - start )) $(kib VmRSS) $(kib RssAnon) $(kib VmHWM) ${first:+after}" >>"$work/samples"
  if [ $(( (now - start) % 60 )) -lt 5 ]; then tail -1 "$work/samples" | awk '{ printf "t=%ss rss=%.0f MiB anon=%.0f MiB peak=%.0f MiB\n", $1, $2/1024, $3/1024, $4/1024 }' >&2; fi
  sleep 5
done
if [ -n "${UNREACHABLE:-}" ]; then
  awk '$1 >= 90 { printf "RSS at %ss (the first sample from 90 s): %.1f MiB\n", $1, $2/1024; exit }' "$work/samples"
  awk '$1 > 90 { print $2 }' "$work/samples" | sort -n | awk '{ a[NR] = $1 } END { if (NR) printf "steady RSS (median after 90 s): %.1f MiB over %d samples\n", a[int((NR+1)/2)]/1024, NR }'
  tail -1 "$work/samples" | awk '{ printf "peak RSS (VmHWM): %.1f MiB\n", $4/1024 }'
  echo "errors logged: $(grep -c ERROR "$work/log" || true) (every member is unreachable)"
  exit 0
fi
awk '$5 == "after" { print $2 }' "$work/samples" | sort -n | awk '{ a[NR] = $1 } END { if (NR) printf "steady RSS (median after the first apply): %.1f MiB over %d samples\n", a[int((NR+1)/2)]/1024, NR }'
tail -1 "$work/samples" | awk '{ printf "peak RSS (VmHWM): %.1f MiB\n", $4/1024 }'
curl -sf "http://127.0.0.1:$port/metrics" | awk '/^flotilla_heap_(allocated|free)_bytes/ { printf "%s after the last cycle: %.1f MiB\n", $1, $2/1048576 }'
[ -n "$first" ] || { echo "the first full apply never completed:" >&2; failures >&2; exit 1; }
if [ -n "$(failures)" ]; then echo "clusters with failed objects at the end:" >&2; failures >&2; exit 1; fi
echo "commits made during the run: $n; errors logged: $(grep -c ERROR "$work/log" || true)"
# The errors by kind, most frequent first: the cluster and object named in each are left
# out, so twenty members' copies of one error count as one line.
grep ERROR "$work/log" | sed -E 's/\x1b\[[0-9;]*m//g; s/ (cluster|object)=("[^"]*"|[^ ]*)//g' | cut -c1-300 | sort | uniq -c | sort -rn | head -10
