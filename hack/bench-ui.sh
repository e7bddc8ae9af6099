#!/usr/bin/env bash
# The fleet page at scale, for docs/performance.md: a generated repository of TEMPLATES
# objects over CLUSTERS members (default 5000x1000, each object placed in about three
# members), served by `flotilla ui` (release). The members are unreachable on purpose
# (a closed port): every cell is then "Unknown", the page is as large as with live
# members, and no cluster is needed. Measures each view's server time (the page's own
# Server-Timing header) and size over RUNS requests, the process's peak memory, and
# first paint in headless Chromium (chromedriver) when it is installed.
# Usage: hack/bench-ui.sh [TEMPLATESxCLUSTERS]   (RUNS=20 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla/target}
size=${1:-5000x1000}
runs=${RUNS:-20}
cargo build --release -q -p flotilla-core --example generate-repo
cargo build --release -q --bin flotilla -p flotilla
work=$(mktemp -d)
cleanup() { [ -n "${ui:-}" ] && kill "$ui" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
"$CARGO_TARGET_DIR/release/examples/generate-repo" "$size" "$work/repo"
clusters=${size#*x}
python3 - "$clusters" > "$work/kubeconfig" <<'PY'
import json, sys
n = int(sys.argv[1])
# Port 9 (discard) on loopback: refused at once, as an unreachable member would be.
config = {"apiVersion": "v1", "kind": "Config",
          "clusters": [{"name": f"c{i}", "cluster": {"server": "https://127.0.0.1:9"}} for i in range(n)],
          "users": [{"name": "u", "user": {"token": "t"}}],
          "contexts": [{"name": f"c{i}", "context": {"cluster": f"c{i}", "user": "u"}} for i in range(n)]}
print(json.dumps(config))
PY
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
start=$(date +%s.%N)
"$CARGO_TARGET_DIR/release/flotilla" ui "$work/repo" --kubeconfig "$work/kubeconfig" \
  --listen "127.0.0.1:$port" --refresh 1h 2>"$work/ui.log" &
ui=$!
until curl -fsS -o /dev/null "http://127.0.0.1:$port/ui/" 2>/dev/null; do
  kill -0 "$ui" 2>/dev/null || { cat "$work/ui.log" >&2; exit 1; }
  sleep 0.05
done
ready=$(python3 -c "import time; print(f'{time.time() - $start:.2f}')")
echo "flotilla ui on $size: first page served ${ready} s after start (render + reading every member)"
python3 - "$port" "$runs" <<'PY'
import statistics, sys, urllib.request
port, runs = sys.argv[1], int(sys.argv[2])
views = [("overview", "/ui/"),
         ("overview, page 40, members 41-60", "/ui/?page=40&columns=3"),
         ("overview, one member", "/ui/?member=c7"),
         ("overview, unhealthy", "/ui/?health=unhealthy"),
         ("member", "/ui/member/c7"),
         ("workload (why)", "/ui/workload/Deployment/ns-0/app-0")]
print(f"{'view':36} {'server ms (median)':>19} {'max':>7} {'KB':>8}")
for name, path in views:
    times, size = [], 0
    for _ in range(runs):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}") as r:
            body = r.read()
            times.append(float(r.headers["Server-Timing"].split("dur=")[1]))
            size = len(body)
    print(f"{name:36} {statistics.median(times):19.1f} {max(times):7.1f} {size / 1024:8.1f}")
PY
rss=$(awk '/VmHWM/ {printf "%.0f", $2 / 1024}' "/proc/$ui/status")
echo "peak RSS of flotilla ui: ${rss} MiB"
if command -v chromedriver >/dev/null && command -v chromium >/dev/null; then
  driver=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  chromedriver --port="$driver" >/dev/null 2>&1 &
  cd_pid=$!
  python3 - "$driver" "$port" <<'PY'
import json, statistics, sys, time, urllib.request
driver, port = sys.argv[1], sys.argv[2]
def call(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{driver}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req))["value"]
for _ in range(100):
    try:
        call("GET", "/status"); break
    except Exception:
        time.sleep(0.1)
caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
    "binary": "/usr/bin/chromium", "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"]}}}}
session = call("POST", "/session", caps)["sessionId"]
try:
    paints, loads = [], []
    for _ in range(5):
        call("POST", f"/session/{session}/url", {"url": f"http://127.0.0.1:{port}/ui/"})
        # Headless Chromium records the paint a moment after the load: ask until it has.
        for _ in range(50):
            got = call("POST", f"/session/{session}/execute/sync", {"script": """
                const p = performance.getEntriesByType('paint');
                const n = performance.getEntriesByType('navigation')[0];
                return [p.length ? p[p.length - 1].startTime : null, n.loadEventEnd];""", "args": []})
            if got[0] is not None:
                break
            time.sleep(0.1)
        if got[0] is not None:
            paints.append(got[0])
        loads.append(got[1])
    paint = f"{statistics.median(paints):.0f} ms" if paints else "not reported"
    print(f"Chromium, overview: first paint {paint} (median of {len(paints)}), load {statistics.median(loads):.0f} ms (median of 5)")
finally:
    call("DELETE", f"/session/{session}")
PY
  kill "$cd_pid" 2>/dev/null || true
else
  echo "chromium or chromedriver not installed (Debian: chromium chromium-driver): no first-paint figure"
fi
