#!/usr/bin/env python3
"""flotilla and Flux side by side on the same member clusters (docs/performance.md,
"Peers side by side"). Run through hack/bench-peers.sh, which builds what it needs.

Four real clusters from hack/local-up.sh: member1..member3 receive the objects, member4
is Flux's host (its CRDs, GitRepository, Kustomizations, Receiver and kubeconfig
Secrets), so Flux's own bookkeeping is not counted against the members. Both tools read
the same repository from the same Git smart-HTTP server over TLS with Basic auth
(hack/git-https-server.py in front of git's http-backend), and both are told of a push
by a signed GitHub webhook sent the moment `git push` returns: flotilla's
/webhook/github, and Flux's notification-controller Receiver (type github), which
annotates the GitRepository as Flux's own webhook path does.

For each size (objects per member: half ConfigMaps with a marker among them, half
Services), each side in turn, alone on the machine:
  first full apply   from the start (flotilla: the process starts; Flux: its
                     GitRepository and Kustomizations are created, controllers already
                     running) until every object is in every member;
  commit → applied   COMMITS commits that each change the marker; from `git push`
                     returning until all three members serve the new value;
  steady state       resync every 30 s (flotilla --resync 30s; Kustomization interval
                     30s), RSS of the side's processes every 2 s, and API requests to
                     the members from the audit logs over a window of whole resyncs:
                     per member per minute, and per member per resync.

Usage: hack/bench-peers.py apply SIZE... (from hack/bench-peers.sh)
Environment: FLOTILLA_BIN, FLOTILLA_TOOLS_BIN (kubectl, source-controller,
kustomize-controller, notification-controller), COMMITS (default 20),
RESYNCS (resyncs per member in the steady window, default 6), SIDES (default
"flotilla flux"; one side alone, to look at it).
"""
import base64
import hashlib
import hmac
import http.client
import json
import os
import pathlib
import re
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOOLS = pathlib.Path(os.environ["FLOTILLA_TOOLS_BIN"])
FLOTILLA = os.environ["FLOTILLA_BIN"]
COMMITS = int(os.environ.get("COMMITS", "20"))
RESYNCS = int(os.environ.get("RESYNCS", "6"))
SIDES = os.environ.get("SIDES", "flotilla flux").split()
MEMBERS = (1, 2, 3)
SECRET = b"bench-peers-webhook"


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(*args, **kw):
    done = subprocess.run(args, capture_output=True, text=True, **kw)
    if done.returncode:
        raise SystemExit(f"bench-peers: {' '.join(map(str, args))[:200]} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return done.stdout


def wait(what, seconds, check, every=0.05):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            if check():
                return
        except (OSError, http.client.HTTPException, ValueError, KeyError):
            pass
        time.sleep(every)
    raise SystemExit(f"bench-peers: {what} not within {seconds} s")


class Api:
    """A member's API server as admin, over one kept TLS connection."""

    def __init__(self, state, i):
        d = state / f"member{i}"
        self.ctx = ssl.create_default_context(cafile=str(d / "pki" / "ca.crt"))
        self.ctx.load_cert_chain(str(d / "pki" / "admin.crt"), str(d / "pki" / "admin.key"))
        self.port = int((d / "port").read_text())
        self.conn = None

    def call(self, method, path, body=None):
        for attempt in (0, 1):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=30)
                self.conn.request(method, path, body, {"Content-Type": "application/json"} if body else {})
                r = self.conn.getresponse()
                return r.status, r.read()
            except (OSError, http.client.HTTPException):
                self.conn = None
                if attempt:
                    raise

    def get(self, path):
        status, body = self.call("GET", path)
        return json.loads(body) if status == 200 else None

    def count(self, ns):
        """ConfigMaps and Services in NS, counted by the API server (`limit=1` and
        `remainingItemCount`), not listed: a poll that listed a thousand objects five
        times a second would slow the very applies it times. The namespace's own
        kube-root-ca.crt is not counted."""
        n = 0
        for kind in ("configmaps", "services"):
            listed = self.get(f"/api/v1/namespaces/{ns}/{kind}?limit=1")
            if listed:
                n += len(listed["items"]) + listed["metadata"].get("remainingItemCount", 0)
        return n - (self.get(f"/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt") is not None)

    def marker(self, ns):
        cm = self.get(f"/api/v1/namespaces/{ns}/configmaps/marker")
        return cm["data"]["seq"] if cm else None


def objects(ns, size, seq):
    """SIZE objects in NS: half ConfigMaps (one the marker), half Services."""
    docs = [f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n",
            f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: marker, namespace: {ns}, labels: {{bench: peers}}}}\ndata: {{seq: \"{seq}\"}}\n"]
    for i in range(size // 2 - 1):
        docs.append(f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm-{i}, namespace: {ns}, labels: {{bench: peers}}}}\n"
                    f"data: {{index: \"{i}\", mode: production, region: local}}\n")
    for i in range(size - size // 2):
        docs.append(f"apiVersion: v1\nkind: Service\nmetadata: {{name: svc-{i}, namespace: {ns}, labels: {{bench: peers}}}}\n"
                    f"spec:\n  selector: {{app: a{i}}}\n  ports: [{{name: http, port: 80, targetPort: 8080}}]\n")
    return "---\n".join(docs)


def write_repo(work, size, seq):
    """fleet/ for flotilla (the objects, three Push Clusters, a policy placing the
    objects on all of them); flux/ for Flux (the same objects in their own namespace)."""
    fleet, flux = work / "fleet", work / "flux"
    fleet.mkdir(exist_ok=True)
    flux.mkdir(exist_ok=True)
    ns = f"flotilla-{size}"
    (fleet / "objects.yaml").write_text(objects(ns, size, seq))
    (fleet / "karmada.yaml").write_text("---\n".join(
        [f"apiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {{name: member{m}}}\nspec: {{syncMode: Push}}\n" for m in MEMBERS]
        + [f"apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: all, namespace: {ns}}}\n"
           "spec:\n  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}, {apiVersion: v1, kind: Service}]\n"]))
    (flux / "objects.yaml").write_text(objects(f"flux-{size}", size, seq))


def push(work, message):
    run("git", "-C", str(work), "add", "-A")
    run("git", "-C", str(work), "commit", "-q", "--allow-empty", "-m", message)
    # GIT_SSL_CAINFO, where a machine sets it, would win over the clone's http.sslCAInfo.
    run("git", "-C", str(work), "push", "-q", "origin", "HEAD:main", env={**os.environ, "GIT_SSL_CAINFO": str(work.parent / "git.crt")})


def github_hook(port, path):
    body = json.dumps({"ref": "refs/heads/main", "repository": {"full_name": "bench/fleet"}}).encode()
    sig = "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("POST", path, body, {"X-Hub-Signature-256": sig, "X-GitHub-Event": "push", "Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    if r.status >= 300:
        raise SystemExit(f"bench-peers: webhook {path} answered {r.status}")


def rss_mib(pids):
    total = 0
    for pid in pids:
        for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total / 1024


def audited(state):
    """Requests each member's API server has logged for the admin user so far."""
    counts = {}
    for m in MEMBERS:
        text = (state / f"member{m}" / "audit.log").read_text(errors="replace")
        counts[m] = text.count('"username":"admin"')
    return counts


def metric(port, name, match=""):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and match in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


class Side:
    """What both tools share in the measurement; subclasses start, stop and count."""
    name = ""

    def __init__(self, env, size):
        self.env, self.size = env, size
        self.ns = f"{self.name}-{size}"

    def converged(self):
        return all(a.count(self.ns) == self.size for a in self.env.apis)

    def serving(self, seq):
        """Every member serves the marker of commit `seq` (one GET each: the poll itself
        must not load the API servers both sides share)."""
        return all(a.marker(self.ns) == seq for a in self.env.apis)

    def measure(self):
        env = self.env
        result = {"side": self.name, "size": self.size}
        start = time.time()
        self.start_following()
        wait(f"{self.name}: first full apply of {self.size} objects", 1800, self.converged, every=0.2)
        result["first_apply_s"] = time.time() - start
        log(f"{self.name} {self.size}: first full apply {result['first_apply_s']:.2f} s")
        time.sleep(2)
        samples = []
        for seq in range(1, COMMITS + 1):
            want = f"{self.name}-{self.size}-{seq}"
            write_repo(env.work, self.size, want)
            push(env.work, want)
            t = time.perf_counter()
            self.announce()
            wait(f"{self.name}: commit {seq} applied", 300, lambda: self.serving(want), every=0.005)
            samples.append(time.perf_counter() - t)
        samples.sort()
        result["commit_p50_s"] = statistics.median(samples)
        result["commit_p99_s"] = samples[min(len(samples) - 1, round(0.99 * (len(samples) - 1)))]
        log(f"{self.name} {self.size}: commit → applied p50 {result['commit_p50_s']:.3f} s, p99 {result['commit_p99_s']:.3f} s")
        result["phases_s"] = self.phases()
        log(f"{self.name} {self.size}: mean seconds by phase, from its own metrics: {result['phases_s']}")
        self.resync_every_30s()
        result.update(self.steady())
        log(f"{self.name} {self.size}: steady {result}")
        self.stop()
        return result

    def steady(self):
        """A window of whole resyncs: RSS samples and audited requests per member."""
        before = self.reconciles()
        wait(f"{self.name}: a resync", 120, lambda: self.reconciles() > before, every=0.2)
        first, audit0, t0 = self.reconciles(), audited(self.env.state), time.time()
        rss = []
        target = first + RESYNCS * len(MEMBERS)
        deadline = t0 + 60 * RESYNCS
        while self.reconciles() < target:
            if time.time() > deadline:
                raise SystemExit(f"bench-peers: {self.name}: {RESYNCS} resyncs not within {60 * RESYNCS} s")
            rss.append(rss_mib(self.pids()))
            time.sleep(2)
        minutes, audit1 = (time.time() - t0) / 60, audited(self.env.state)
        per_member = statistics.mean(audit1[m] - audit0[m] for m in MEMBERS)
        return {"rss_median_mib": statistics.median(rss), "rss_max_mib": max(rss),
                "requests_per_member_per_minute": per_member / minutes,
                "requests_per_member_per_resync": per_member / RESYNCS, "window_s": minutes * 60}


class Flotilla(Side):
    name = "flotilla"

    def __init__(self, env, size):
        super().__init__(env, size)
        self.port = free_port()
        self.proc = None

    def launch(self, resync):
        env = self.env
        self.proc = subprocess.Popen(
            [FLOTILLA, "run", "--repo", env.repo_url, "--git-username", "bench", "--git-password-file", str(env.password),
             "--path", "fleet", "--kubeconfig", str(env.kubeconfig), "--listen", f"127.0.0.1:{self.port}",
             "--cache-dir", str(env.work_root / f"flotilla-cache-{self.size}"), "--instance", f"peers-{self.size}",
             "--interval", "1h", "--resync", resync, "--webhook-secret-file", str(env.secret_file)],
            stdout=subprocess.DEVNULL, stderr=open(env.work_root / f"flotilla-{self.size}.log", "a"),
            env={**os.environ, "RUST_LOG": "warn", "SSL_CERT_FILE": str(env.cert), "MALLOC_ARENA_MAX": "2"})

    def start_following(self):
        self.launch("1h")

    def announce(self):
        github_hook(self.port, "/webhook/github")

    def resync_every_30s(self):
        self.stop()
        self.launch("30s")
        wait("flotilla: ready again", 60, lambda: self.reconciles() >= len(MEMBERS), every=0.2)

    def reconciles(self):
        return metric(self.port, "flotilla_reconcile_seconds_count")

    def phases(self):
        """Mean fetch and per-cluster reconcile time over the run so far."""
        mean = lambda name: metric(self.port, f"{name}_sum") / max(1, metric(self.port, f"{name}_count"))
        return {"fetch": round(mean("flotilla_fetch_seconds"), 4), "reconcile per cluster": round(mean("flotilla_reconcile_seconds"), 4)}

    def pids(self):
        return [self.proc.pid]

    def kill(self):
        if self.proc:
            self.proc.kill()

    def stop(self):
        if self.proc:
            self.proc.terminate()
            self.proc.wait()
            self.proc = None


class Flux(Side):
    name = "flux"

    def __init__(self, env, size):
        super().__init__(env, size)
        self.procs = {}
        self.ports = {name: free_port() for name in ("storage", "events", "receiver", "sm", "sh", "km", "kh", "nm", "nh")}

    def kubectl(self, *args, stdin=None):
        return run(str(TOOLS / "kubectl"), "--kubeconfig", str(self.env.host_kubeconfig), *args, input=stdin)

    def host_objects(self):
        env, p = self.env, self.ports
        docs = [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "git-auth", "namespace": "flux-system"},
                 "stringData": {"username": "bench", "password": env.password.read_text().strip(), "ca.crt": env.cert.read_text()}},
                {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "webhook-token", "namespace": "flux-system"},
                 "stringData": {"token": SECRET.decode()}}]
        for m in MEMBERS:
            docs.append({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"member{m}-kubeconfig", "namespace": "flux-system"},
                         "stringData": {"value": run(str(TOOLS / "kubectl"), "config", "view", "--raw", "--minify",
                                                     "--context", f"member{m}", "--kubeconfig", str(env.kubeconfig))}})
        docs.append({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
                     "metadata": {"name": "fleet", "namespace": "flux-system"},
                     "spec": {"interval": "1h", "url": env.repo_url, "ref": {"branch": "main"}, "secretRef": {"name": "git-auth"}}})
        docs.append({"apiVersion": "notification.toolkit.fluxcd.io/v1", "kind": "Receiver",
                     "metadata": {"name": "github", "namespace": "flux-system"},
                     "spec": {"type": "github", "events": ["push"], "secretRef": {"name": "webhook-token"},
                              "resources": [{"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository", "name": "fleet"}]}})
        for m in MEMBERS:
            docs.append({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                         "metadata": {"name": f"member{m}", "namespace": "flux-system"},
                         "spec": {"interval": "1h", "path": "./flux", "prune": True, "timeout": "10m",
                                  "sourceRef": {"kind": "GitRepository", "name": "fleet"},
                                  "kubeConfig": {"secretRef": {"name": f"member{m}-kubeconfig", "key": "value"}}}})
        return "\n".join(json.dumps(d) for d in docs)

    def launch(self):
        env, p = self.env, self.ports
        (env.work_root / "flux-storage").mkdir(exist_ok=True)
        common = ["--enable-leader-election=false", "--log-level=info"]
        argv = {
            "source-controller": [f"--storage-path={env.work_root / 'flux-storage'}", f"--storage-addr=127.0.0.1:{p['storage']}",
                                  f"--storage-adv-addr=127.0.0.1:{p['storage']}", f"--metrics-addr=127.0.0.1:{p['sm']}",
                                  f"--health-addr=127.0.0.1:{p['sh']}", f"--events-addr=http://127.0.0.1:{p['events']}/"],
            "kustomize-controller": [f"--metrics-addr=127.0.0.1:{p['km']}", f"--health-addr=127.0.0.1:{p['kh']}",
                                     f"--events-addr=http://127.0.0.1:{p['events']}/"],
            "notification-controller": [f"--metrics-addr=127.0.0.1:{p['nm']}", f"--health-addr=127.0.0.1:{p['nh']}",
                                        f"--events-addr=127.0.0.1:{p['events']}", f"--receiverAddr=127.0.0.1:{p['receiver']}"],
        }
        for name, args in argv.items():
            self.procs[name] = subprocess.Popen(
                [str(TOOLS / name), *common, *args], stdout=subprocess.DEVNULL,
                stderr=open(env.work_root / f"{name}-{self.size}.log", "a"),
                env={**os.environ, "KUBECONFIG": str(env.host_kubeconfig), "RUNTIME_NAMESPACE": "flux-system"})
        for name, port in (("source-controller", p["sh"]), ("kustomize-controller", p["kh"]), ("notification-controller", p["nh"])):
            wait(f"{name} ready", 120, lambda port=port: self.healthy(port), every=0.2)

    def healthy(self, port):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        c.request("GET", "/readyz")
        return c.getresponse().status == 200

    def start_following(self):
        self.launch()
        time.sleep(2)  # informers synced: the controllers are idle and waiting
        self.kubectl("apply", "--server-side", "-f", "-", stdin=self.host_objects())

    def hook_path(self):
        receiver = json.loads(self.kubectl("get", "receiver", "github", "-n", "flux-system", "-o", "json"))
        return receiver["status"]["webhookPath"]

    def announce(self):
        if not hasattr(self, "path"):
            wait("the Receiver's webhook path", 60, lambda: bool(self.hook_path()), every=0.2)
            self.path = self.hook_path()
        github_hook(self.ports["receiver"], self.path)

    def resync_every_30s(self):
        for m in MEMBERS:
            self.kubectl("patch", "kustomization", f"member{m}", "-n", "flux-system", "--type", "merge",
                         "-p", '{"spec":{"interval":"30s"}}')

    def reconciles(self):
        return metric(self.ports["km"], "controller_runtime_reconcile_total", 'controller="kustomization"')

    def phases(self):
        """Mean reconcile time of the GitRepository and of a Kustomization so far."""
        def mean(port, controller):
            total = metric(port, "controller_runtime_reconcile_time_seconds_sum", f'controller="{controller}"')
            return total / max(1, metric(port, "controller_runtime_reconcile_time_seconds_count", f'controller="{controller}"'))
        return {"GitRepository": round(mean(self.ports["sm"], "gitrepository"), 4),
                "Kustomization": round(mean(self.ports["km"], "kustomization"), 4)}

    def pids(self):
        return [p.pid for p in self.procs.values()]

    def kill(self):
        for proc in self.procs.values():
            proc.kill()

    def stop(self):
        # Kustomizations go first, while the controllers can still remove their finalizers.
        self.kubectl("delete", "kustomizations.kustomize.toolkit.fluxcd.io", "--all", "-n", "flux-system", "--wait=true", "--timeout=300s")
        self.kubectl("delete", "gitrepositories.source.toolkit.fluxcd.io,receivers.notification.toolkit.fluxcd.io",
                     "--all", "-n", "flux-system", "--wait=true", "--timeout=120s")
        for proc in self.procs.values():
            proc.terminate()
        for proc in self.procs.values():
            proc.wait()
        self.procs = {}


class Env:
    def __init__(self):
        self.work_root = pathlib.Path(tempfile.mkdtemp(prefix="bench-peers."))
        self.state = self.work_root / "clusters"
        self.kubeconfig = self.work_root / "members.config"
        self.procs = []

    def up(self):
        policy = self.work_root / "audit-all.yaml"
        policy.write_text("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\n"
                          "rules:\n- level: Metadata\n  users: [admin]\n- level: None\n")
        self.clusters_env = {**os.environ, "FLOTILLA_CLUSTERS_DIR": str(self.state), "KUBECONFIG_OUT": str(self.kubeconfig),
                             "FLOTILLA_AUDIT_POLICY": str(policy)}
        log("bench-peers: starting four member clusters")
        subprocess.run([str(ROOT / "hack" / "local-up.sh"), "4"], env=self.clusters_env, check=True, capture_output=True)
        self.apis = [Api(self.state, m) for m in MEMBERS]
        self.host_kubeconfig = self.work_root / "host.config"
        self.host_kubeconfig.write_text(run(str(TOOLS / "kubectl"), "config", "view", "--raw", "--minify", "--context", "member4",
                                            "--kubeconfig", str(self.kubeconfig)))
        self.git_server()
        self.flux_crds()

    def git_server(self):
        w = self.work_root
        self.cert, key = w / "git.crt", w / "git.key"
        run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(self.cert), "-days", "2",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-addext", "basicConstraints=critical,CA:TRUE")
        self.password = w / "git.password"
        self.password.write_text(base64.b16encode(os.urandom(12)).decode())
        self.secret_file = w / "webhook.secret"
        self.secret_file.write_bytes(SECRET)
        served = w / "served"
        served.mkdir()
        run("git", "init", "-q", "--bare", "-b", "main", str(served / "fleet.git"))
        run("git", "-C", str(served / "fleet.git"), "config", "http.receivepack", "true")
        port = free_port()
        self.procs.append(subprocess.Popen(
            [sys.executable, str(ROOT / "hack" / "git-https-server.py"), "--root", str(served), "--port", str(port), "--cert", str(self.cert),
             "--key", str(key), "--user", "bench", "--password-file", str(self.password)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
        assert self.procs[-1].stdout.readline().strip() == "ready"
        self.repo_url = f"https://127.0.0.1:{port}/fleet.git"
        self.work = w / "work"
        self.work.mkdir()
        password = self.password.read_text().strip()
        run("git", "-C", str(self.work), "init", "-q", "-b", "main")
        run("git", "-C", str(self.work), "config", "user.email", "bench@example.invalid")
        run("git", "-C", str(self.work), "config", "user.name", "bench")
        run("git", "-C", str(self.work), "config", "http.sslCAInfo", str(self.cert))
        run("git", "-C", str(self.work), "remote", "add", "origin", f"https://bench:{password}@127.0.0.1:{port}/fleet.git")

    def flux_crds(self):
        dirs = []
        for module, path in (("flux-source", "github.com/fluxcd/source-controller"), ("flux-kustomize", "github.com/fluxcd/kustomize-controller"),
                             ("flux-notification", "github.com/fluxcd/notification-controller")):
            src = run("go", "list", "-m", "-f", "{{.Dir}}", path, cwd=ROOT / "hack" / "tools" / module,
                      env={**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}).strip()
            dirs.append(pathlib.Path(src) / "config" / "crd" / "bases")
        kubectl = [str(TOOLS / "kubectl"), "--kubeconfig", str(self.host_kubeconfig)]
        for d in dirs:
            run(*kubectl, "apply", "--server-side", "-f", str(d))
        run(*kubectl, "create", "namespace", "flux-system")
        run(*kubectl, "wait", "--for=condition=Established", "crd", "--all", "--timeout=120s")

    def down(self):
        if getattr(self, "running", None):
            self.running.kill()
        for p in self.procs:
            p.kill()
        subprocess.run([str(ROOT / "hack" / "local-down.sh")], env=self.clusters_env, capture_output=True)


def main():
    sizes = [int(s) for s in sys.argv[2:]] or [100, 1000]
    env = Env()
    results = []
    try:
        env.up()
        for size in sizes:
            write_repo(env.work, size, "0")
            push(env.work, f"size {size}")
            for side in [{"flotilla": Flotilla, "flux": Flux}[name](env, size) for name in SIDES]:
                env.running = side
                results.append(side.measure())
                env.running = None
                for api in env.apis:
                    api.call("DELETE", f"/api/v1/namespaces/{side.ns}")
                wait(f"namespace {side.ns} deleted", 600, lambda ns=side.ns: all(a.get(f"/api/v1/namespaces/{ns}") is None for a in env.apis), every=0.5)
    finally:
        env.down()
    print(json.dumps(results, indent=1))
    print(f"\n{'size':>5} {'side':<9} {'first apply':>12} {'commit p50':>11} {'p99':>8} {'RSS MiB':>8} {'req/min':>8} {'req/resync':>10}")
    for r in results:
        print(f"{r['size']:>5} {r['side']:<9} {r['first_apply_s']:>10.2f} s {r['commit_p50_s']:>9.3f} s {r['commit_p99_s']:>6.3f} s "
              f"{r['rss_median_mib']:>8.1f} {r['requests_per_member_per_minute']:>8.1f} {r['requests_per_member_per_resync']:>10.1f}")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if len(sys.argv) < 2 or sys.argv[1] != "apply":
        raise SystemExit(__doc__)
    main()
