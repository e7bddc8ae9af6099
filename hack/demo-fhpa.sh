#!/usr/bin/env bash
# The FederatedHPA seed tutorial, replayed end to end on this machine:
#   three member clusters (hack/local-up.sh), a git server (git-daemon) serving a copy
#   of examples/repo, `flotilla run` on it, and CPU load written into member1's and
#   member2's metrics.k8s.io (PodMetrics, as metrics-server would report them).
# It prints the nginx pods per cluster as `flotilla get pods` shows them and the
# replicas in Git, and exits 0 only if replicas went 1 -> 10 (5/5 running) -> 1.
# Everything it starts is stopped and removed on exit.
#
# Usage: hack/demo-fhpa.sh        (needs what hack/local-up.sh needs, and cargo)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/hack/lib/scratch.sh"
scratch demo

say "building flotilla"
(cd "$root" && cargo build --release -q --bin flotilla)
flotilla=${CARGO_TARGET_DIR:-$root/target}/release/flotilla

say "starting member1..member3"
FLOTILLA_OWNER_PID=$$ "$root/hack/local-up.sh" 3 | tail -1

say "serving a copy of examples/repo with git-daemon"
cp -r "$root/examples/repo" "$tmp/work"
serve_work "the seed tutorials"
http_port=$(free_port)

say "flotilla run (autoscaler sync every 5 s, write-back to Git)"
RUST_LOG=info "$flotilla" run --insecure-allow-http --repo "git://127.0.0.1:$git_port/fleet.git" --kubeconfig "$KUBECONFIG_OUT" \
  --listen "127.0.0.1:$http_port" --cache-dir "$tmp/cache" --interval 2 --autoscale-interval 5 \
  >"$tmp/controller.log" 2>&1 &
pids+=($!)
wait_ready "$http_port" "the controller"

# The load driver: every second, a PodMetrics sample for every nginx pod in member1 and
# member2 with the CPU (millicores) in $tmp/load.
echo 1 >"$tmp/load"
python3 - "$FLOTILLA_CLUSTERS_DIR" "$tmp/load" <<'EOF' &
import datetime, http.client, json, pathlib, ssl, sys, time
state, load = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
def conn(i):
    d = state / f"member{i}"
    ctx = ssl.create_default_context(cafile=str(d / "pki" / "ca.crt"))
    ctx.load_cert_chain(str(d / "pki" / "admin.crt"), str(d / "pki" / "admin.key"))
    return http.client.HTTPSConnection("127.0.0.1", int((d / "port").read_text()), context=ctx, timeout=5)
while True:
    cpu = load.read_text().strip()
    for i in (1, 2):
        try:
            c = conn(i)
            c.request("GET", "/api/v1/namespaces/default/pods?labelSelector=app%3Dnginx")
            pods = json.loads(c.getresponse().read())["items"]
            for pod in pods:
                name = pod["metadata"]["name"]
                now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
                body = json.dumps({"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
                                   "metadata": {"name": name, "namespace": "default", "labels": {"app": "nginx"}},
                                   "timestamp": now, "window": "1s",
                                   "containers": [{"name": "nginx", "usage": {"cpu": f"{cpu}m", "memory": "10Mi"}}]})
                c.request("PATCH", f"/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/{name}?fieldManager=demo-load&force=true",
                          body, {"Content-Type": "application/apply-patch+yaml"})
                c.getresponse().read()
            c.close()
        except (OSError, http.client.HTTPException, KeyError, ValueError):
            pass
    time.sleep(1)
EOF
pids+=($!)

replicas() { git -C "$tmp/fleet.git" show main:nginx/nginx.yaml | sed -n 's/^  replicas: *\([0-9]*\).*/\1/p'; }
# Running nginx pods per member, from `flotilla get pods` (columns NAME CLUSTER READY STATUS …).
pods() {
  "$flotilla" get pods -n default -l app=nginx --kubeconfig "$KUBECONFIG_OUT" 2>/dev/null \
    | awk 'NR > 1 && $4 == "Running" { n[$2]++ } END { printf "%d/%d", n["member1"], n["member2"] }'
}
show() {
  printf '[%3ss] load %3sm  replicas in Git: %-3s pods member1/member2: %s\n' "$SECONDS" "$(cat "$tmp/load")" "$(replicas)" "$(pods)"
}
# wait_until SECONDS CONDITION...: prints progress every 5 s.
wait_until() {
  local limit=$(( SECONDS + $1 )); shift
  until "$@"; do
    (( SECONDS < limit )) || return 1
    show; sleep 5
  done
  show
}
at() { [ "$(replicas)" = "$1" ] && [ "$(pods)" = "$2" ]; }

say "idle: nginx runs 1 pod in member1 (1:1 static weight over member1 and member2)"
SECONDS=0
wait_until 60 at 1 1/0 || { echo "FAIL: the seed did not start at 1 (1/0)" >&2; exit 1; }
"$flotilla" get pods -n default -l app=nginx --kubeconfig "$KUBECONFIG_OUT"

say "load: 25m per pod, 100% of the request against the 10% target"
echo 25 >"$tmp/load"
wait_until 150 at 10 5/5 || { echo "FAIL: replicas did not reach 10 (5/5)" >&2; tail "$tmp/controller.log" >&2; exit 1; }
"$flotilla" get pods -n default -l app=nginx --kubeconfig "$KUBECONFIG_OUT"

say "idle again: back to 1 after the 10 s scale-down window"
echo 0 >"$tmp/load"
wait_until 150 at 1 1/0 || { echo "FAIL: replicas did not return to 1" >&2; tail "$tmp/controller.log" >&2; exit 1; }
"$flotilla" get pods -n default -l app=nginx --kubeconfig "$KUBECONFIG_OUT"

say "the autoscaler's commits"
git -C "$tmp/fleet.git" log --format='%h %an: %s' main
say "PASS: replicas went 1 -> 10 (5/5) -> 1"
