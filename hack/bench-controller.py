#!/usr/bin/env python3
"""Push-to-applied latency of `flotilla run` (docs/performance.md).

Starts three fresh member clusters, a real git server (`git daemon`) with a 100-object
repo, and the release controller; then, N times (default 30), commits a change to one
ConfigMap, pushes it and measures until all three members serve the new value. Runs
once announcing each push by a signed webhook (poll interval 60 s, so only the webhook
can explain a fast apply), once by polling every second; and each of those again with
member2's API server frozen (SIGSTOP once the controller is ready: it accepts
connections and never answers), measured on member1 and member3. Prints p50/p99/max
per mode.

Usage: hack/bench-controller.py [N]
       hack/bench-controller.py --soak SECONDS   (memory soak: a commit every 3 s)
       FLOTILLA_WRAPPER="heaptrack -o FILE" hack/bench-controller.py --soak SECONDS
       FLOTILLA_BIN=/path/to/flotilla hack/bench-controller.py ...   (that binary, no build;
           lets a long soak run while the target directory is rebuilt)
"""
import hashlib
import hmac
import http.client
import json
import os
import pathlib
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
SOAK = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[1] == "--soak" else 0
N = int(sys.argv[1]) if len(sys.argv) > 1 and not SOAK else 30
NS = "bench-ctrl"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def fleet(seq):
    docs = [f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NS}}}\n"]
    docs += [f"apiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {{name: member{m}}}\nspec: {{syncMode: Push}}\n" for m in (1, 2, 3)]
    docs.append(f"apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: all, namespace: {NS}}}\n"
                "spec:\n  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n")
    docs += [f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm-{i}, namespace: {NS}}}\ndata: {{index: \"{i}\"}}\n" for i in range(96)]
    docs.append(f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: marker, namespace: {NS}}}\ndata: {{seq: \"{seq}\"}}\n")
    return "---\n".join(docs)


class Member:
    """Keeps one TLS connection to a member's API server (admin client certificate)."""

    def __init__(self, state, i):
        d = state / f"member{i}"
        ctx = ssl.create_default_context(cafile=str(d / "pki" / "ca.crt"))
        ctx.load_cert_chain(str(d / "pki" / "admin.crt"), str(d / "pki" / "admin.key"))
        self.conn = http.client.HTTPSConnection("127.0.0.1", int((d / "port").read_text()), context=ctx)

    def seq(self):
        self.conn.request("GET", f"/api/v1/namespaces/{NS}/configmaps/marker")
        r = self.conn.getresponse()
        body = r.read()
        return json.loads(body)["data"]["seq"] if r.status == 200 else None


def freeze(state, member, frozen):
    """SIGSTOP (or SIGCONT) one member's API server, as local-up recorded its pid."""
    for line in (state / "pids").read_text().splitlines():
        pid, _, name = line.partition(" ")
        if name == f"{member}-apiserver":
            os.kill(int(pid), signal.SIGSTOP if frozen else signal.SIGCONT)
            return
    raise SystemExit(f"no pid for {member}-apiserver in {state / 'pids'}")


def run_mode(name, state, kubeconfig, served, work, git_port, webhook, frozen):
    """Each mode is a controller of the one instance `bench`: the next takes over the
    previous one's inventory and objects. Under two instance names the second would find
    every object another instance's, which flotilla never takes over. With `frozen`,
    member2 is frozen once the controller is ready and thawed when the mode ends; the
    samples are then taken on member1 and member3."""
    secret = b"bench-secret"
    tmp = pathlib.Path(tempfile.mkdtemp())
    (tmp / "secret").write_bytes(secret)
    port = free_port()
    binary = controller_binary()
    args = [str(binary), "run", "--insecure-allow-http", "--repo", f"git://127.0.0.1:{git_port}/fleet.git", "--kubeconfig", str(kubeconfig),
            "--listen", f"127.0.0.1:{port}", "--cache-dir", str(tmp / "cache"), "--instance", "bench",
            "--interval", "60" if webhook else "1", "--webhook-secret-file", str(tmp / "secret")]
    controller = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "RUST_LOG": "warn"})
    members = [Member(state, i) for i in ((1, 3) if frozen else (1, 2, 3))]
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                c.request("GET", "/readyz")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        if frozen:
            freeze(state, "member2", True)
        samples = []
        for seq in range(1, N + 1):
            (work / "fleet.yaml").write_text(fleet(f"{name}-{seq}"))
            git(work, "commit", "-qam", f"{name} {seq}")
            git(work, "push", "-q", "origin", "HEAD:main")
            start = time.perf_counter()
            if webhook:
                body = json.dumps({"ref": "refs/heads/main"}).encode()
                sig = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("POST", "/webhook/github", body, {"X-Hub-Signature-256": sig, "Content-Type": "application/json"})
                c.getresponse().read()
            want = f"{name}-{seq}"
            while not all(m.seq() == want for m in members):
                if time.perf_counter() - start > 30:
                    raise SystemExit(f"{name}: commit {seq} not applied within 30 s")
                time.sleep(0.005)
            samples.append(time.perf_counter() - start)
        return samples
    finally:
        if frozen:
            freeze(state, "member2", False)
        controller.kill()
        controller.wait()


def controller_binary():
    return os.environ.get("FLOTILLA_BIN") or ROOT / os.environ.get("CARGO_TARGET_DIR", "target") / "release" / "flotilla"


def memory(pid):
    """RSS, its anonymous part (heap and stacks; the rest is the binary's own pages) in
    MiB, and open file descriptors."""
    fields = {}
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "RssAnon"):
            fields[name] = int(value.split()[0]) / 1024
    fds = len(list(pathlib.Path(f"/proc/{pid}/fd").iterdir()))
    return f"{fields.get('VmRSS', 0):>8.1f} {fields.get('RssAnon', 0):>9.1f} {fds:>4}"


def heap(port):
    """The allocator's live and free bytes after the controller's last cycle, in MiB
    (its /metrics; '-' where the allocator does not count)."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
    except OSError:
        return f"{'-':>9} {'-':>9}"
    values = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in ("flotilla_heap_allocated_bytes", "flotilla_heap_free_bytes"):
            values[name] = int(value) / 2**20
    live, free = values.get("flotilla_heap_allocated_bytes"), values.get("flotilla_heap_free_bytes")
    return f"{live:>9.2f} {free:>9.2f}" if live is not None else f"{'-':>9} {'-':>9}"


def soak(state, kubeconfig, work, git_port, seconds):
    """A commit and a signed webhook every 3 s for `seconds`; RSS every minute."""
    secret = b"soak-secret"
    tmp = pathlib.Path(tempfile.mkdtemp())
    (tmp / "secret").write_bytes(secret)
    port = free_port()
    binary = controller_binary()
    # FLOTILLA_WRAPPER: a command to run the controller under ("heaptrack -o FILE",
    # "env MALLOC_ARENA_MAX=2").
    wrapper = os.environ.get("FLOTILLA_WRAPPER", "").split()
    controller = subprocess.Popen([*wrapper, str(binary), "run", "--insecure-allow-http", "--repo", f"git://127.0.0.1:{git_port}/fleet.git", "--kubeconfig", str(kubeconfig),
                                   "--listen", f"127.0.0.1:{port}", "--cache-dir", str(tmp / "cache"), "--instance", "soak",
                                   "--interval", "10", "--resync", "60", "--webhook-secret-file", str(tmp / "secret")],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "RUST_LOG": "warn"},
                                  start_new_session=True)
    member = Member(state, 1)
    start, seq, applied, next_sample = time.time(), 0, 0, 0.0
    print(f"{'minute':>6} {'commits':>8} {'applied':>8} {'rss MiB':>8} {'anon MiB':>9} {'fds':>4} {'heap MiB':>9} {'free MiB':>9}", flush=True)
    try:
        while time.time() - start < seconds:
            seq += 1
            (work / "fleet.yaml").write_text(fleet(f"soak-{seq}"))
            git(work, "commit", "-qam", f"soak {seq}")
            git(work, "push", "-q", "origin", "HEAD:main")
            body = json.dumps({"ref": "refs/heads/main"}).encode()
            sig = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("POST", "/webhook/github", body, {"X-Hub-Signature-256": sig})
                c.getresponse().read()
            except OSError:
                pass
            time.sleep(3)
            try:
                applied += member.seq() == f"soak-{seq}"
            except (OSError, http.client.HTTPException, KeyError, ValueError):
                member = Member(state, 1)
            if time.time() - start >= next_sample:
                print(f"{int((time.time() - start) / 60):>6} {seq:>8} {applied:>8} {memory(controller.pid)} {heap(port)}", flush=True)
                next_sample += 60
        print(f"{int((time.time() - start) / 60):>6} {seq:>8} {applied:>8} {memory(controller.pid)} {heap(port)}", flush=True)
    finally:
        # The whole session: a wrapper (heaptrack) would otherwise leave the controller running.
        os.killpg(controller.pid, signal.SIGKILL)
        controller.wait()


def main():
    if not os.environ.get("FLOTILLA_BIN"):
        subprocess.run(["cargo", "build", "--release", "-q", "--bin", "flotilla"], cwd=ROOT, check=True)
    work_root = pathlib.Path(tempfile.mkdtemp())
    state, kubeconfig = work_root / "clusters", work_root / "members.config"
    env = {**os.environ, "FLOTILLA_CLUSTERS_DIR": str(state), "KUBECONFIG_OUT": str(kubeconfig)}
    subprocess.run([str(ROOT / "hack" / "local-up.sh"), "3"], env=env, check=True, capture_output=True)
    daemon = None
    try:
        served, work = work_root / "served", work_root / "work"
        served.mkdir()
        git(served, "init", "-q", "--bare", "-b", "main", "fleet.git")
        git(work_root, "clone", "-q", str(served / "fleet.git"), "work")
        git(work, "config", "user.email", "bench@example.invalid")
        git(work, "config", "user.name", "bench")
        (work / "fleet.yaml").write_text(fleet("0"))
        git(work, "add", "-A")
        git(work, "commit", "-qm", "initial")
        git(work, "push", "-q", "origin", "HEAD:main")
        git_port = free_port()
        exec_path = subprocess.run(["git", "--exec-path"], capture_output=True, text=True, check=True).stdout.strip()
        # git-daemon itself: killing the `git daemon` wrapper would leave it running.
        daemon = subprocess.Popen([f"{exec_path}/git-daemon", "--reuseaddr", "--export-all", "--listen=127.0.0.1", f"--port={git_port}",
                                   f"--base-path={served}", str(served)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        if SOAK:
            soak(state, kubeconfig, work, git_port, SOAK)
            return
        print(f"{N} commits, 100-object repo, 3 member clusters: seconds from push to applied "
              "in all three (member1 and member3 while member2 is frozen)")
        print(f"{'mode':<26} {'p50':>8} {'p99':>8} {'max':>8}")
        for webhook in (True, False):
            for frozen in (False, True):
                name = ("webhook" if webhook else "polling") + (", member2 frozen" if frozen else "")
                tag = ("webhook" if webhook else "polling") + ("-frozen" if frozen else "")
                s = sorted(run_mode(tag, state, kubeconfig, served, work, git_port, webhook, frozen))
                p99 = s[min(len(s) - 1, round(0.99 * (len(s) - 1)))]
                print(f"{name:<26} {statistics.median(s):8.3f} {p99:8.3f} {s[-1]:8.3f}", flush=True)
    finally:
        if daemon:
            daemon.kill()
        subprocess.run([str(ROOT / "hack" / "local-down.sh")], env=env, capture_output=True)


if __name__ == "__main__":
    # SIGTERM (kill, timeout) unwinds like Ctrl-C: the controller and the members go too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    main()
