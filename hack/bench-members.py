#!/usr/bin/env python3
"""The controller's cost per member (docs/performance.md, "Cost per member").

For each member count (default 10 20 40) it starts that many fresh, lean member
clusters (hack/local-up.sh with FLOTILLA_MEMBERS_LEAN=1: etcd and a real kube-apiserver
each, nothing else), a repo of OBJECTS ConfigMaps (default 100) placed on every member,
and the release controller following it (defaults, but for `--interval 1` and
`--resync RESYNC`, default 30 s, so that a window holds several drift-correcting
resyncs). Once every member serves the first revision and SETTLE seconds (default 15)
have passed, it measures a WINDOW (default 120 s) of steady state:

- memory: the median VmRSS over the window and VmHWM (the peak);
- connections: the controller's established TCP connections, sampled every 0.25 s,
  median and peak (an idle controller holds none: it connects for a resync or a commit,
  and the pool closes the connections after);
- requests: what the controller sent the members' API servers, counted in their audit
  logs (a policy that logs every request of the controller's user and nothing else; the
  script reads members as another user): per minute over the window, and per member per
  resync;
- CPU: user + system time over the window.

Then COMMITS (default 5) commits each change one ConfigMap, timed until every member
serves it (p50, max), with the requests they cost per member per commit. At the largest count it times the same commits once more with one
and with two replicas under `--leader-elect --sharding` (Leases in member1). It prints
one row per count and the least-squares slope per member of each figure.

Usage: hack/bench-members.py [COUNT ...]
       FLOTILLA_BIN=/path/to/flotilla   that binary, no build
"""
import calendar
import http.client
import importlib.util
import json
import os
import pathlib
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
NS = "bench-members"
OBJECTS = int(os.environ.get("OBJECTS", "100"))
SETTLE = float(os.environ.get("SETTLE", "15"))
WINDOW = float(os.environ.get("WINDOW", "120"))
COMMITS = int(os.environ.get("COMMITS", "5"))
RESYNC = float(os.environ.get("RESYNC", "30"))
POLICY = ROOT / "hack" / "audit-policy-admin.yaml"


# A free port and a quiet git, as the controller benchmark has them.
_spec = importlib.util.spec_from_file_location("bench_controller", ROOT / "hack" / "bench-controller.py")
_controller = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_controller)
free_port, git = _controller.free_port, _controller.git


def fleet(n, seq):
    docs = [f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NS}}}\n"]
    docs += [f"apiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {{name: member{m}}}\nspec: {{syncMode: Push}}\n"
             for m in range(1, n + 1)]
    docs.append(f"apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: all, namespace: {NS}}}\n"
                "spec:\n  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n")
    docs += [f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm-{i}, namespace: {NS}}}\ndata: {{index: \"{i}\"}}\n"
             for i in range(OBJECTS - 1)]
    docs.append(f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: marker, namespace: {NS}}}\ndata: {{seq: \"{seq}\"}}\n")
    return "---\n".join(docs)


class Member:
    """One TLS connection to a member's API server as `kwok` (a user lean members leave
    idle, so the audit policy counts the controller's requests only)."""

    def __init__(self, state, i):
        d = state / f"member{i}"
        self.ctx = ssl.create_default_context(cafile=str(d / "pki" / "ca.crt"))
        self.ctx.load_cert_chain(str(d / "pki" / "kwok.crt"), str(d / "pki" / "kwok.key"))
        self.port = int((d / "port").read_text())
        self.connect()

    def connect(self):
        self.conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=10)

    def seq(self):
        # The API server closes a connection left idle (the steady window): connect again.
        for attempt in (1, 2):
            try:
                self.conn.request("GET", f"/api/v1/namespaces/{NS}/configmaps/marker")
                r = self.conn.getresponse()
                body = r.read()
                return json.loads(body)["data"]["seq"] if r.status == 200 else None
            except (http.client.HTTPException, ConnectionError):
                self.conn.close()
                self.connect()
                if attempt == 2:
                    raise


def controller(args, port, cache, extra=()):
    binary = os.environ.get("FLOTILLA_BIN") or ROOT / os.environ.get("CARGO_TARGET_DIR", "target") / "release" / "flotilla"
    cmd = [str(binary), "run", *args, "--listen", f"127.0.0.1:{port}", "--cache-dir", str(cache), *extra]
    env = {**os.environ, "RUST_LOG": "warn", "MALLOC_ARENA_MAX": "2"}
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)


def until_served(members, want, limit):
    """Seconds until every member serves `want` as the marker's seq."""
    start, left = time.perf_counter(), list(members)
    while left:
        if time.perf_counter() - start > limit:
            raise SystemExit(f"{len(left)} of {len(members)} members do not serve {want} after {limit} s")
        left = [m for m in left if m.seq() != want]
        if left:
            time.sleep(0.02)
    return time.perf_counter() - start


def commits(work, n, members, label):
    """COMMITS commits, each timed until every member serves it: (p50, max)."""
    samples = []
    for k in range(COMMITS):
        want = f"{label}-{k}"
        (work / "fleet.yaml").write_text(fleet(n, want))
        git(work, "commit", "-qam", want)
        samples.append(until_served(members, want, 120))
    return statistics.median(samples), max(samples)


def proc(pid):
    status = dict(line.split(":", 1) for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines())
    stat = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
    return int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024, cpu


def connections(pid):
    """Established TCP connections among the process's descriptors."""
    inodes = set()
    for fd in pathlib.Path(f"/proc/{pid}/fd").iterdir():
        try:
            link = os.readlink(fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in pathlib.Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            count += fields[3] == "01" and fields[9] in inodes
    return count


class Sampler(threading.Thread):
    """The controller's connections and RSS every 0.25 s, from `start` until `stop`."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.samples, self.done, self.lock = pid, [], threading.Event(), threading.Lock()

    def run(self):
        while not self.done.wait(0.25):
            try:
                sample = (connections(self.pid), proc(self.pid)[0])
            except (OSError, KeyError):  # the process is gone (a zombie has no VmRSS)
                return
            with self.lock:
                self.samples.append(sample)

    def take(self):
        """The samples since the last take."""
        with self.lock:
            taken, self.samples = self.samples, []
        return taken or [(0, 0.0)]

    def stop(self):
        self.done.set()


def requests(state, n, start, end):
    """Requests the controller's user sent every member, begun in [start, end)."""
    ids = set()
    for i in range(1, n + 1):
        log = state / f"member{i}" / "audit.log"
        for line in log.read_text().splitlines() if log.exists() else []:
            event = json.loads(line)
            at = event.get("requestReceivedTimestamp", "")
            seconds = calendar.timegm(time.strptime(at[:19], "%Y-%m-%dT%H:%M:%S")) + float("0" + at[19:-1])
            if start <= seconds < end:
                ids.add(event["auditID"])
    return len(ids)


def measure(n, work_root):
    state, kubeconfig = work_root / "clusters", work_root / "members.config"
    env = {**os.environ, "FLOTILLA_CLUSTERS_DIR": str(state), "KUBECONFIG_OUT": str(kubeconfig),
           "FLOTILLA_MEMBERS_LEAN": "1", "FLOTILLA_AUDIT_POLICY": str(POLICY)}
    subprocess.run([str(ROOT / "hack" / "local-up.sh"), str(n)], env=env, check=True, capture_output=True)
    try:
        work = work_root / "repo"
        work.mkdir()
        git(work, "init", "-q", "-b", "main")
        git(work, "config", "user.email", "bench@example.invalid")
        git(work, "config", "user.name", "bench")
        (work / "fleet.yaml").write_text(fleet(n, "0"))
        git(work, "add", "-A")
        git(work, "commit", "-qm", "initial")
        members = [Member(state, i) for i in range(1, n + 1)]
        args = ["--repo", str(work), "--kubeconfig", str(kubeconfig), "--instance", "bench", "--interval", "1",
                "--resync", f"{RESYNC:g}s"]
        port = free_port()
        one = controller(args, port, work_root / "cache")
        sampler = Sampler(one.pid)
        try:
            first = until_served(members, "0", 300)
            time.sleep(SETTLE)
            sampler.start()
            start, (_, _, cpu0) = time.time(), proc(one.pid)
            time.sleep(WINDOW)
            end, (_, peak, cpu1) = time.time(), proc(one.pid)
            steady = sampler.take()
            sent = requests(state, n, start, end)
            row = {"members": n, "first": first, "rss": statistics.median(r for _, r in steady), "peak": peak,
                   "connections": statistics.median(c for c, _ in steady), "connections_peak": max(c for c, _ in steady),
                   "requests_min": sent * 60 / (end - start), "per_resync": sent / n / ((end - start) / RESYNC),
                   "cpu_ms_min": (cpu1 - cpu0) * 1000 * 60 / (end - start)}
            begun = time.time()
            row["commit"] = commits(work, n, members, "one")
            row["per_commit"] = requests(state, n, begun, time.time() + 1) / n / COMMITS
            row["connections_peak"] = max(row["connections_peak"], max(c for c, _ in sampler.take()))
        finally:
            sampler.stop()
            one.kill()
            one.wait()
        if n == max(COUNTS):
            row["sharded"] = sharded(args, kubeconfig, work, n, members, work_root)
        return row
    finally:
        subprocess.run([str(ROOT / "hack" / "local-down.sh")], env=env, capture_output=True)


def sharded(args, kubeconfig, work, n, members, work_root):
    """Commit → every member with 1, then 2, replicas under --sharding."""
    extra = ["--leader-elect", "--sharding", "--host-kubeconfig", str(kubeconfig), "--host-context", "member1",
             "--namespace", "default"]
    out = {}
    for replicas in (1, 2):
        ports = [free_port() for _ in range(replicas)]
        procs = [controller(args, port, work_root / f"cache-{replicas}-{port}", extra) for port in ports]
        try:
            # Every replica joined, and together they own every member, before the clock starts.
            deadline = time.time() + 120
            while sum(len(shard(port).get("clusters", [])) for port in ports) != n:
                if time.time() > deadline:
                    raise SystemExit(f"{replicas} sharded replica(s) do not own the {n} members after 120 s")
                time.sleep(0.5)
            out[replicas] = commits(work, n, members, f"r{replicas}")
        finally:
            for p in procs:
                p.kill()
                p.wait()
    return out


def shard(port):
    """A replica's /status `shard` (empty while it does not answer)."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", "/status")
        return json.loads(c.getresponse().read()).get("shard") or {}
    except (OSError, ValueError):
        return {}


def slope(xs, ys):
    mx, my = statistics.mean(xs), statistics.mean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


COUNTS = [int(a) for a in sys.argv[1:]] or [10, 20, 40]


def main():
    if not os.environ.get("FLOTILLA_BIN"):
        subprocess.run(["cargo", "build", "--release", "-q", "--bin", "flotilla"], cwd=ROOT, check=True)
    rows = []
    print(f"{'members':>7} {'first s':>8} {'RSS MiB':>8} {'peak MiB':>9} {'conns':>6} {'peak':>5} {'req/min':>8} "
          f"{'req/resync':>10} {'req/commit':>10} {'CPU ms/min':>11} {'commit p50 s':>13} {'max s':>6}"
          "   (req/resync and req/commit per member)", flush=True)
    for n in COUNTS:
        with tempfile.TemporaryDirectory() as tmp:
            row = measure(n, pathlib.Path(tmp))
        rows.append(row)
        print(f"{n:>7} {row['first']:>8.2f} {row['rss']:>8.1f} {row['peak']:>9.1f} {row['connections']:>6g} "
              f"{row['connections_peak']:>5} {row['requests_min']:>8.1f} {row['per_resync']:>10.1f} "
              f"{row['per_commit']:>10.1f} {row['cpu_ms_min']:>11.1f} {row['commit'][0]:>13.3f} {row['commit'][1]:>6.3f}",
              flush=True)
        for replicas, (p50, worst) in row.get("sharded", {}).items():
            print(f"{'':>7} sharded, {replicas} replica(s): commit p50 {p50:.3f} s, max {worst:.3f} s", flush=True)
    if len(rows) > 1:
        xs = [r["members"] for r in rows]
        print("per member (least squares): " + ", ".join(
            f"{name} {slope(xs, [r[key] for r in rows]):.3f}"
            for name, key in (("RSS MiB", "rss"), ("peak connections", "connections_peak"),
                              ("req/min", "requests_min"), ("CPU ms/min", "cpu_ms_min"))))


if __name__ == "__main__":
    main()
