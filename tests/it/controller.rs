//! `flotilla run` against a real git server process (`git daemon`) and real members.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hmac::{Hmac, KeyInit, Mac};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ObjectMeta};
use sha2::Sha256;

use crate::apply::fleet;
use crate::members::members;
use crate::support::{run_from_daemon, wait_for, write};

/// Kills a child process when dropped.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git").args(args).current_dir(dir).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

pub fn commit_and_push(work: &Path, message: &str) {
    git(work, &["add", "-A"]);
    git(work, &["-c", "user.name=test", "-c", "user.email=test@example.invalid", "commit", "-qm", message]);
    git(work, &["push", "-q", "origin", "HEAD:main"]);
}

/// A plain HTTP/1.1 request; returns the status code and body.
pub fn http(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let _ = stream.write_all(body);
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let text = String::from_utf8_lossy(&response).into_owned();
    let code = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default())
}

fn sign(secret: &[u8], body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret).unwrap();
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Webhook-driven controllers fetch rarely (`--interval 1h`); drift is still corrected
/// every `--resync`, not at the next fetch.
#[tokio::test(flavor = "multi_thread")]
async fn drift_is_corrected_every_resync_even_when_fetches_are_an_hour_apart() {
    let members = members();
    let ns = "e2e-resync";
    let repo = serve(&fleet(ns, &[("kept", &["member1"])]));
    let (_controller, http_port, _cache) =
        run_on_daemon(repo.port, &["--interval", "1h", "--resync", "2s", "--instance", "resync"]);
    wait_for("readyz", Duration::from_secs(60), || async { ready(http_port) }).await;
    let cms: Api<ConfigMap> = Api::namespaced(members.client("member1").await, ns);
    assert!(cms.get_opt("kept").await.unwrap().is_some());
    cms.delete("kept", &Default::default()).await.unwrap();
    let deleted = Instant::now();
    wait_for("the deleted ConfigMap back", Duration::from_secs(20), || async {
        cms.get_opt("kept").await.unwrap().is_some()
    })
    .await;
    eprintln!("drift corrected {:?} after the delete (resync 2s, interval 1h)", deleted.elapsed());
}

/// An object a member rejects (here: its namespace is neither in the repository nor in
/// the member) is retried at the next fetch once the member would take it, not left
/// for the resync (an hour here) because the rest of the cluster applied.
#[tokio::test(flavor = "multi_thread")]
async fn an_object_a_member_rejects_is_retried_at_the_next_fetch() {
    let members = members();
    let (ns, late) = ("e2e-retry", "e2e-retry-late");
    let rejected = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: late, namespace: {late}}}\ndata: {{k: v}}\n---\n\
         apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: late, namespace: {late}}}\n\
         spec:\n  resourceSelectors: [{{apiVersion: v1, kind: ConfigMap, name: late}}]\n  placement: {{clusterAffinity: {{clusterNames: [member1]}}}}\n"
    );
    let repo = serve(&format!("{}---\n{rejected}", fleet(ns, &[("first", &["member1"])])));
    let (_controller, http_port, _cache) =
        run_on_daemon(repo.port, &["--interval", "1s", "--resync", "1h", "--instance", "retry"]);
    wait_for("readyz", Duration::from_secs(60), || async { ready(http_port) }).await;
    let client = members.client("member1").await;
    assert!(Api::<ConfigMap>::namespaced(client.clone(), ns).get_opt("first").await.unwrap().is_some());
    let lates: Api<ConfigMap> = Api::namespaced(client.clone(), late);
    assert!(lates.get_opt("late").await.unwrap().is_none(), "rejected while its namespace is missing");
    let namespace =
        Namespace { metadata: ObjectMeta { name: Some(late.into()), ..Default::default() }, ..Default::default() };
    Api::<Namespace>::all(client).create(&Default::default(), &namespace).await.unwrap();
    let created = Instant::now();
    wait_for("the rejected ConfigMap applied by a retry", Duration::from_secs(30), || async {
        lates.get_opt("late").await.unwrap().is_some()
    })
    .await;
    eprintln!("retried and applied {:?} after its namespace appeared (interval 1s, resync 1h)", created.elapsed());
}

/// A stop that comes mid-reconcile ends the controller then, not after the next poll
/// interval. The cycle is held open by a member whose API server is stopped (SIGSTOP):
/// it stays Ready until its probes have failed for 30 s, so the cycle waits on it.
#[tokio::test(flavor = "multi_thread")]
async fn a_stop_during_a_reconcile_ends_the_controller_at_once() {
    let dedicated = crate::members::Dedicated::start(1);
    let members = &dedicated.0;
    let ns = "e2e-stop";
    // member1 alone, and ConfigMaps placed on it.
    let one = |names: &[&str]| {
        let mut docs = vec![
            format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n"),
            "apiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {name: member1}\nspec: {syncMode: Push}\n".into(),
            format!("apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: all, namespace: {ns}}}\nspec:\n  resourceSelectors: [{{apiVersion: v1, kind: ConfigMap}}]\n"),
        ];
        docs.extend(
            names
                .iter()
                .map(|n| format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {n}, namespace: {ns}}}\n")),
        );
        docs.join("---\n")
    };
    let repo = serve(&one(&["first"]));
    let secret_dir = tempfile::tempdir().unwrap();
    let secret_file = secret_dir.path().join("secret");
    std::fs::write(&secret_file, b"stop-secret").unwrap();
    let http_port = free_port();
    let mut controller = Running(
        run_from_daemon(repo.port)
            .args(["--interval", "1h", "--instance", "stop", "--kubeconfig", members.kubeconfig().to_str().unwrap()])
            .args([
                "--listen",
                &format!("127.0.0.1:{http_port}"),
                "--webhook-secret-file",
                secret_file.to_str().unwrap(),
            ])
            .args(["--cache-dir", secret_dir.path().join("cache").to_str().unwrap(), "--request-timeout", "60s"])
            .quiet(),
    );
    wait_for("readyz", Duration::from_secs(60), || async { ready(http_port) }).await;
    write(repo.work.path(), "fleet.yaml", one(&["first", "second"]).as_bytes());
    commit_and_push(repo.work.path(), "second");
    members.freeze("member1", true);
    let body = br#"{"ref":"refs/heads/main"}"#;
    assert_eq!(
        http(http_port, "POST", "/webhook/github", &[("X-Hub-Signature-256", &sign(b"stop-secret", body))], body).0,
        202
    );
    std::thread::sleep(Duration::from_secs(2));
    signal(&controller, "TERM");
    let stopped = Instant::now();
    let mut exited = false;
    while stopped.elapsed() < Duration::from_secs(10) {
        if controller.0.try_wait().unwrap().is_some() {
            exited = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    members.freeze("member1", false);
    assert!(exited, "still running 10 s after SIGTERM");
    eprintln!("stopped {:?} after SIGTERM, mid-reconcile", stopped.elapsed());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_controller_follows_the_branch_keeps_the_last_good_revision_and_takes_webhooks() {
    let members = members();
    let ns = "e2e-ctrl";
    let repo = serve(&fleet(ns, &[("first", &["member1"])]));
    let (work, git_port) = (&repo.work, repo.port);
    let secret = b"hook-secret-9f2";
    let secret_dir = tempfile::tempdir().unwrap();
    let secret_file = secret_dir.path().join("secret");
    std::fs::write(&secret_file, secret).unwrap();
    let http_port = free_port();
    let cache = tempfile::tempdir().unwrap();
    let _controller = Running(
        run_from_daemon(git_port)
            .args(["--interval", "60", "--instance", "ctrl"])
            .args([
                "--kubeconfig",
                members.kubeconfig().to_str().unwrap(),
                "--listen",
                &format!("127.0.0.1:{http_port}"),
            ])
            .args([
                "--cache-dir",
                cache.path().to_str().unwrap(),
                "--webhook-secret-file",
                secret_file.to_str().unwrap(),
            ])
            .quiet(),
    );
    // Wait for the server, then for the first revision.
    wait_for("readyz", Duration::from_secs(60), || async { ready(http_port) }).await;
    let cms: Api<ConfigMap> = Api::namespaced(members.client("member1").await, ns);
    assert!(cms.get_opt("first").await.unwrap().is_some());

    let push = |branch: &str| format!(r#"{{"ref":"refs/heads/{branch}","after":"0"}}"#).into_bytes();
    let deliver =
        |body: &[u8]| http(http_port, "POST", "/webhook/github", &[("X-Hub-Signature-256", &sign(secret, body))], body);

    // A broken commit: reported, nothing changes, the last good revision stays applied.
    write(work.path(), "broken.yaml", b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: oops\n");
    commit_and_push(work.path(), "broken");
    assert_eq!(deliver(&push("main")).0, 202);
    wait_for("render_failing 1", Duration::from_secs(20), || async {
        http(http_port, "GET", "/metrics", &[], b"").1.lines().any(|l| l == "flotilla_render_failing 1")
    })
    .await;
    let (_, status) = http(http_port, "GET", "/status", &[], b"");
    assert!(status.contains("broken.yaml"), "{status}");
    let controller = format!("http://127.0.0.1:{http_port}");
    let (code, out, _) = crate::support::run(&["status", "--controller", &controller]);
    assert_eq!(code, 1, "a revision that does not render is not healthy:\n{out}");
    assert!(out.lines().any(|l| l.starts_with("error") && l.contains("broken.yaml")), "{out}");
    assert!(cms.get_opt("first").await.unwrap().is_some(), "the last good revision stays");

    // The fix, announced by a signed webhook, applies at once (the poll interval is 60 s).
    std::fs::remove_file(work.path().join("broken.yaml")).unwrap();
    write(work.path(), "fleet.yaml", fleet(ns, &[("first", &["member1"]), ("second", &["member1"])]).as_bytes());
    commit_and_push(work.path(), "second");
    let pushed = Instant::now();
    assert_eq!(deliver(&push("main")).0, 202);
    wait_for("the second ConfigMap", Duration::from_secs(20), || async {
        cms.get_opt("second").await.unwrap().is_some()
    })
    .await;
    let latency = pushed.elapsed();
    // Two revisions applied in three members through the same three clients.
    let head = Command::new("git").args(["rev-parse", "HEAD"]).current_dir(work.path()).output().unwrap();
    let head = String::from_utf8(head.stdout).unwrap();
    let recorded = format!("revision=\"{}\"}} 1", head.trim());
    wait_for("the second revision recorded in every member", Duration::from_secs(20), || async {
        http(http_port, "GET", "/metrics", &[], b"").1.lines().filter(|l| l.ends_with(&recorded)).count() == 3
    })
    .await;
    let metrics = http(http_port, "GET", "/metrics", &[], b"").1;
    assert!(metrics.lines().any(|l| l == "flotilla_render_failing 0"));
    assert!(metrics.lines().any(|l| l == "flotilla_member_clients_built_total 3"), "{metrics}");
    let (code, out, _) = crate::support::run(&["status", "--controller", &controller]);
    assert_eq!(code, 0, "{out}");
    assert!(out.lines().any(|l| l.starts_with("member1") && l.contains("applied")), "{out}");

    // Refused without a fetch: a bad signature, an oversized body, a malformed payload,
    // a push to another branch.
    let body = push("main");
    assert_eq!(http(http_port, "POST", "/webhook/github", &[("X-Hub-Signature-256", "sha256=00")], &body).0, 401);
    let huge = vec![b'x'; 2 << 20];
    assert_eq!(
        http(http_port, "POST", "/webhook/github", &[("X-Hub-Signature-256", &sign(secret, &huge))], &huge).0,
        413
    );
    assert_eq!(deliver(b"{not json").0, 400);
    assert_eq!(deliver(&push("other")).0, 202);
    assert_eq!(http(http_port, "POST", "/webhook/gitlab", &[("X-Gitlab-Token", "wrong")], &body).0, 401);
    let metrics = http(http_port, "GET", "/metrics", &[], b"").1;
    for outcome in ["bad_signature", "malformed", "other_branch", "accepted"] {
        assert!(metrics.contains(&format!("outcome=\"{outcome}\"")), "{outcome} counted:\n{metrics}");
    }
    assert_eq!(http(http_port, "GET", "/healthz", &[], b"").0, 200, "still serving after hostile deliveries");

    // A cluster the repository drops leaves the status and the revision gauge.
    let member3 = "apiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {name: member3}\nspec: {syncMode: Push}\n---\n";
    let without = fleet(ns, &[("first", &["member1"]), ("second", &["member1"])]).replace(member3, "");
    assert!(!without.contains("member3"));
    write(work.path(), "fleet.yaml", without.as_bytes());
    commit_and_push(work.path(), "drop member3");
    assert_eq!(deliver(&push("main")).0, 202);
    wait_for("member3 gone from /status", Duration::from_secs(20), || async {
        let (_, status) = http(http_port, "GET", "/status", &[], b"");
        status.contains("member2") && !status.contains("member3")
    })
    .await;
    let metrics = http(http_port, "GET", "/metrics", &[], b"").1;
    assert!(!metrics.lines().any(|l| l.starts_with("flotilla_applied_revision{cluster=\"member3\"")), "{metrics}");
    eprintln!("webhook push to applied: {latency:?}");
}

/// A served repository and its working clone.
pub struct Served {
    pub served: tempfile::TempDir,
    pub work: tempfile::TempDir,
    pub daemon: Running,
    pub port: u16,
}

impl Served {
    /// Starts serving again on the same port after `daemon` was killed.
    pub fn restart(&mut self) {
        self.daemon = daemon(self.served.path(), self.port);
    }
}

/// A git daemon serving `base` on `port`, with pushes allowed.
fn daemon(base: &Path, port: u16) -> Running {
    let daemon = git_daemon()
        .args(["--reuseaddr", "--export-all", "--enable=receive-pack", "--listen=127.0.0.1", &format!("--port={port}")])
        .arg(format!("--base-path={}", base.display()))
        .arg(base)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Running(daemon)
}

/// Git's daemon itself (`git daemon` forks it, and killing the wrapper would leave the
/// server running).
pub fn git_daemon() -> Command {
    let exec_path = Command::new("git").arg("--exec-path").output().unwrap();
    Command::new(Path::new(String::from_utf8(exec_path.stdout).unwrap().trim()).join("git-daemon"))
}

pub fn serve(initial: &str) -> Served {
    let served = tempfile::tempdir().unwrap();
    git(served.path(), &["init", "-q", "--bare", "-b", "main", "fleet.git"]);
    let work = tempfile::tempdir().unwrap();
    git(work.path(), &["clone", "-q", served.path().join("fleet.git").to_str().unwrap(), "."]);
    write(work.path(), "fleet.yaml", initial.as_bytes());
    commit_and_push(work.path(), "initial");
    let port = free_port();
    let daemon = daemon(served.path(), port);
    Served { served, work, daemon, port }
}

#[tokio::test(flavor = "multi_thread")]
async fn two_controllers_share_a_lease_and_the_standby_takes_over() {
    let members = members();
    let ns = "e2e-lease";
    let repo = serve(&fleet(ns, &[("one", &["member1"])]));
    let _keep = &repo.served;
    let kubeconfig = members.kubeconfig().to_str().unwrap().to_owned();
    let start = |http_port: u16, cache: &Path| {
        Running(
            run_from_daemon(repo.port)
                .args(["--interval", "1"])
                .args([
                    "--instance",
                    "lease",
                    "--kubeconfig",
                    &kubeconfig,
                    "--listen",
                    &format!("127.0.0.1:{http_port}"),
                ])
                .args(["--cache-dir", cache.to_str().unwrap(), "--leader-elect", "--host-kubeconfig", &kubeconfig])
                .args(["--host-context", "member3", "--lease-namespace", "default", "--lease-duration", "4"])
                .quiet(),
        )
    };
    let (port_a, port_b) = (free_port(), free_port());
    let (cache_a, cache_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut a = start(port_a, cache_a.path());
    let mut b = start(port_b, cache_b.path());
    wait_for("a leader", Duration::from_secs(60), || async { ready(port_a) || ready(port_b) }).await;
    let cms: Api<ConfigMap> = Api::namespaced(members.client("member1").await, ns);
    assert!(cms.get_opt("one").await.unwrap().is_some());
    // Only one instance leads; the other stands by, not ready.
    for _ in 0..10 {
        assert!(ready(port_a) != ready(port_b), "exactly one leader");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (leader_port, standby_port) = if ready(port_a) { (port_a, port_b) } else { (port_b, port_a) };
    // Kill the leader outright; the standby takes over within the lease duration.
    let killed = Instant::now();
    sigkill(if leader_port == port_a { &a } else { &b });
    wait_for("the standby to lead", Duration::from_secs(15), || async { ready(standby_port) }).await;
    let takeover = killed.elapsed();
    assert!(takeover < Duration::from_secs(4 + 4), "takeover took {takeover:?}");
    write(repo.work.path(), "fleet.yaml", fleet(ns, &[("one", &["member1"]), ("two", &["member1"])]).as_bytes());
    commit_and_push(repo.work.path(), "two");
    wait_for("the new leader to apply", Duration::from_secs(20), || async {
        cms.get_opt("two").await.unwrap().is_some()
    })
    .await;
    assert!(cms.get_opt("one").await.unwrap().is_some(), "nothing lost in the handover");
    eprintln!("lease takeover after SIGKILL of the leader: {takeover:?}");

    // A rolling upgrade stops the leader with SIGTERM: it exits at once and gives the
    // lease up (a SIGKILLed leader stays the holder until the lease lapses).
    let port_c = free_port();
    let cache_c = tempfile::tempdir().unwrap();
    let _c = start(port_c, cache_c.path());
    wait_for("the new standby's server", Duration::from_secs(30), || async {
        std::net::TcpStream::connect(("127.0.0.1", port_c)).is_ok()
    })
    .await;
    assert!(!ready(port_c), "a standby while the other leads");
    let leader = if leader_port == port_a { &mut b } else { &mut a };
    let leader_pid = leader.0.id();
    let stopped = Instant::now();
    signal(leader, "TERM");
    let mut exit = None;
    while exit.is_none() && stopped.elapsed() < Duration::from_secs(5) {
        exit = leader.0.try_wait().unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let exited = stopped.elapsed();
    assert!(exit.is_some_and(|s| s.success()), "the old leader exits cleanly on SIGTERM: {exit:?}");
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(members.client("member3").await, "default");
    let holder = leases.get("flotilla-lease").await.unwrap().spec.unwrap().holder_identity;
    assert!(
        !holder.as_deref().is_some_and(|h| h.ends_with(&format!("-{leader_pid}"))),
        "the lease was given up: {holder:?}"
    );
    wait_for("the standby to lead after SIGTERM", Duration::from_secs(15), || async { ready(port_c) }).await;
    let handover = stopped.elapsed();
    assert!(handover < Duration::from_secs(4 + 4), "handover after SIGTERM took {handover:?}");
    eprintln!("SIGTERM: the leader exited after {exited:?}, the standby led after {handover:?}");
}

/// `flotilla run ARGS` reading the `git daemon` on `port`, with the members' kubeconfig
/// and a cache directory of its own (returned: it lives as long as the controller),
/// quiet, serving on a free port.
pub fn run_on_daemon(port: u16, args: &[&str]) -> (Running, u16, tempfile::TempDir) {
    let (http_port, cache) = (free_port(), tempfile::tempdir().unwrap());
    let controller = run_from_daemon(port)
        .args(args)
        .args(["--kubeconfig", members().kubeconfig().to_str().unwrap()])
        .args(["--listen", &format!("127.0.0.1:{http_port}"), "--cache-dir", cache.path().to_str().unwrap()])
        .quiet();
    (Running(controller), http_port, cache)
}

/// `flotilla run ARGS` with the members' kubeconfig, quiet, serving on a free port.
fn run_on_members(args: &[&str]) -> (Running, u16) {
    let port = free_port();
    let controller = Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .arg("run")
        .args(args)
        .args(["--kubeconfig", members().kubeconfig().to_str().unwrap(), "--listen", &format!("127.0.0.1:{port}")])
        .quiet();
    (Running(controller), port)
}

/// Commits everything in a local working tree.
fn commit_local(work: &Path, message: &str) {
    git(work, &["add", "-A"]);
    git(work, &["-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", message]);
}

/// Quiet, logging-light child processes for tests.
pub trait Quiet {
    fn quiet(&mut self) -> Child;
}

impl Quiet for Command {
    fn quiet(&mut self) -> Child {
        self.env("RUST_LOG", "warn").stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap()
    }
}

/// Whether a controller's HTTP server answers `/readyz` with 200.
pub fn ready(port: u16) -> bool {
    TcpStream::connect(("127.0.0.1", port)).is_ok() && http(port, "GET", "/readyz", &[], b"").0 == 200
}

/// SIGKILLs a running process (its guard still reaps it).
fn sigkill(guard: &Running) {
    signal(guard, "KILL");
}

fn signal(guard: &Running, name: &str) {
    let pid = guard.0.id().to_string();
    assert!(Command::new("kill").args([&format!("-{name}"), &pid]).status().unwrap().success());
}

/// deploy/'s RBAC applied to a host cluster is enough for the controller to lead with a
/// real ServiceAccount token from that API server, and grants nothing more.
#[tokio::test(flavor = "multi_thread")]
async fn the_deploy_rbac_is_enough_and_no_more() {
    let members = members();
    let host = members.client("member3").await;
    apply_rbac(&host, "deploy/flotilla.yaml").await;
    let token = service_account_token(&host, "flotilla-system", "flotilla").await;
    // No more than it needs: nothing outside its namespace, no workloads, no nodes.
    let as_sa = client_as("member3", &token).await;
    let can = |verb: &'static str, group: &'static str, resource: &'static str, ns: Option<&'static str>| {
        can(&as_sa, verb, group, resource, ns)
    };
    assert!(can("update", "coordination.k8s.io", "leases", Some("flotilla-system")).await);
    assert!(!can("delete", "coordination.k8s.io", "leases", Some("flotilla-system")).await);
    assert!(can("get", "", "secrets", Some("flotilla-system")).await);
    assert!(!can("get", "", "secrets", Some("kube-system")).await);
    assert!(!can("create", "apps", "deployments", Some("flotilla-system")).await);
    assert!(!can("update", "coordination.k8s.io", "leases", Some("kube-system")).await);
    assert!(!can("list", "", "nodes", None).await);
    // The fleet page's reviews, and nothing they would read.
    assert!(can("create", "authentication.k8s.io", "tokenreviews", None).await);
    assert!(can("create", "authorization.k8s.io", "subjectaccessreviews", None).await);
    assert!(!can("list", "", "serviceaccounts", Some("kube-system")).await);

    // And enough: the controller leads with it and applies, configured exactly as in a
    // Pod, so kube's in-cluster loader (not a kubeconfig) authenticates it.
    let pod = InPod::new("member3", &token, "flotilla-system");
    let repo = serve(&fleet("e2e-sa", &[("via-sa", &["member2"])]));
    let http_port = free_port();
    let cache = tempfile::tempdir().unwrap();
    let _controller = Running(
        pod.command(env!("CARGO_BIN_EXE_flotilla"))
            .args([
                "run",
                "--insecure-allow-http",
                "--repo",
                &format!("git://127.0.0.1:{}/fleet.git", repo.port),
                "--instance",
                "sa",
            ])
            .args([
                "--kubeconfig",
                members.kubeconfig().to_str().unwrap(),
                "--listen",
                &format!("127.0.0.1:{http_port}"),
            ])
            .args(["--cache-dir", cache.path().to_str().unwrap(), "--leader-elect", "--lease-duration", "5"])
            .args(["--sharding", "--ui", "--ui-kubernetes-auth"])
            .quiet(),
    );
    wait_for("the ServiceAccount-backed controller to lead", Duration::from_secs(60), || async { ready(http_port) })
        .await;
    // Ready may come while a member the health loop has not judged yet waits; it follows.
    let cms: Api<ConfigMap> = Api::namespaced(members.client("member2").await, "e2e-sa");
    wait_for("via-sa in member2", Duration::from_secs(30), || async { cms.get_opt("via-sa").await.unwrap().is_some() })
        .await;
    // The fleet page reviews tokens with the in-cluster identity: no token, 401; the
    // controller's own token names a user the Role flotilla-fleet-viewer is not bound
    // to, 403 (503 would mean the reviews were refused).
    assert_eq!(http(http_port, "GET", "/ui/", &[], b"").0, 401);
    let bearer = format!("Bearer {token}");
    let (code, body) = http(http_port, "GET", "/ui/", &[("Authorization", &bearer)], b"");
    assert_eq!(code, 403, "{body}");
}

/// A client of member `cluster` that authenticates with a ServiceAccount's `token`.
pub async fn client_as(cluster: &str, token: &str) -> kube::Client {
    let config = serde_json::json!({
        "apiVersion": "v1", "kind": "Config", "clusters": [kubeconfig_cluster(cluster)],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": cluster, "user": "sa"}}], "current-context": "sa"
    });
    let kc: kube::config::Kubeconfig = serde_json::from_value(config).unwrap();
    kube::Client::try_from(kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.unwrap()).unwrap()
}

/// Whether `client`'s user may `verb` the resource (SelfSubjectAccessReview).
pub async fn can(client: &kube::Client, verb: &str, group: &str, resource: &str, namespace: Option<&str>) -> bool {
    use k8s_openapi::api::authorization::v1::SelfSubjectAccessReview;
    let review: SelfSubjectAccessReview = serde_json::from_value(serde_json::json!({"spec": {"resourceAttributes":
        {"verb": verb, "group": group, "resource": resource, "namespace": namespace}}}))
    .unwrap();
    let api = Api::<SelfSubjectAccessReview>::all(client.clone());
    api.create(&kube::api::PostParams::default(), &review).await.unwrap().status.unwrap().allowed
}

/// Applies the access-control part of a manifest under deploy/ (namespaces, service
/// accounts, roles and their bindings) to a cluster.
pub async fn apply_rbac(client: &kube::Client, file: &str) {
    let text = std::fs::read_to_string(crate::support::root().join(file)).unwrap();
    let objects: Vec<serde_json::Value> =
        text.split("\n---\n").map(|doc| serde_saphyr::from_str(doc).unwrap()).collect();
    apply_access(client, &objects).await;
}

/// Applies the namespaces, service accounts, roles and their bindings among `objects`.
pub async fn apply_access(client: &kube::Client, objects: &[serde_json::Value]) {
    use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
    let ssa = PatchParams::apply("e2e").force();
    for value in objects {
        let resource = match value["kind"].as_str().unwrap() {
            "Namespace" => ApiResource::erase::<Namespace>(&()),
            "ServiceAccount" => ApiResource::erase::<ServiceAccount>(&()),
            "Role" => ApiResource::erase::<Role>(&()),
            "RoleBinding" => ApiResource::erase::<RoleBinding>(&()),
            "ClusterRole" => ApiResource::erase::<ClusterRole>(&()),
            "ClusterRoleBinding" => ApiResource::erase::<ClusterRoleBinding>(&()),
            _ => continue,
        };
        let api: Api<DynamicObject> = match value["metadata"]["namespace"].as_str() {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        api.patch(value["metadata"]["name"].as_str().unwrap(), &ssa, &Patch::Apply(value)).await.unwrap();
    }
}

/// A token for a ServiceAccount, issued by the cluster's API server (TokenRequest).
pub async fn service_account_token(client: &kube::Client, namespace: &str, name: &str) -> String {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::core::v1::ServiceAccount;
    let request: TokenRequest =
        serde_json::from_value(serde_json::json!({"spec": {"audiences": [], "expirationSeconds": 3600}})).unwrap();
    Api::<ServiceAccount>::namespaced(client.clone(), namespace)
        .create_token_request(name, &kube::api::PostParams::default(), &request)
        .await
        .unwrap()
        .status
        .unwrap()
        .token
}

/// A member's `clusters[]` entry of the members' kubeconfig (server and CA).
fn kubeconfig_cluster(name: &str) -> serde_json::Value {
    let config: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(members().kubeconfig()).unwrap()).unwrap();
    config["clusters"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap().clone()
}

/// A Pod's view of a cluster: in a private mount namespace, a ServiceAccount's token, the
/// cluster's CA and the namespace are mounted where the kubelet puts them, and
/// KUBERNETES_SERVICE_HOST/PORT point at that cluster's API server.
pub struct InPod {
    dir: tempfile::TempDir,
    host: String,
    port: String,
    namespace: String,
}

impl InPod {
    pub fn new(cluster: &str, token: &str, namespace: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let entry = kubeconfig_cluster(cluster);
        std::fs::write(dir.path().join("token"), token).unwrap();
        std::fs::write(dir.path().join("namespace"), namespace).unwrap();
        let ca = entry["cluster"]["certificate-authority-data"].as_str().unwrap();
        let ca = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, ca).unwrap();
        std::fs::write(dir.path().join("ca.crt"), ca).unwrap();
        let server = entry["cluster"]["server"].as_str().unwrap().trim_start_matches("https://");
        let (host, port) = server.rsplit_once(':').unwrap();
        InPod { dir, host: host.to_owned(), port: port.to_owned(), namespace: namespace.to_owned() }
    }

    /// `program` as it would run in the Pod.
    pub fn command(&self, program: &str) -> Command {
        const MOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
        std::fs::create_dir_all("/var/run/secrets").unwrap();
        let script = format!(
            "mount --make-rprivate / && mount -t tmpfs tmpfs /var/run/secrets && mkdir -p {MOUNT} \
             && mount --bind -o ro {} {MOUNT} && exec \"$0\" \"$@\"",
            self.dir.path().display()
        );
        let mut command = Command::new("unshare");
        command.args(["--mount", "sh", "-c", &script, program]);
        command
            .env_remove("KUBECONFIG")
            .env("KUBERNETES_SERVICE_HOST", &self.host)
            .env("KUBERNETES_SERVICE_PORT", &self.port)
            .env("POD_NAMESPACE", &self.namespace);
        command
    }
}

/// Member credentials from labelled Secrets in the controller's namespace of the host
/// cluster: each Secret's kubeconfig (whatever its context is called) reaches its member.
#[tokio::test(flavor = "multi_thread")]
async fn member_credentials_come_from_labelled_secrets() {
    use k8s_openapi::api::core::v1::{Namespace, Secret};
    use kube::api::{Patch, PatchParams};

    let members = members();
    let host = members.client("member3").await;
    let ns = "e2e-secrets";
    let ssa = PatchParams::apply("e2e").force();
    Api::<Namespace>::all(host.clone())
        .patch(
            ns,
            &ssa,
            &Patch::Apply(serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})),
        )
        .await
        .unwrap();
    let all: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(members.kubeconfig()).unwrap()).unwrap();
    for member in ["member1", "member2"] {
        let pick =
            |list: &str, name: &str| all[list].as_array().unwrap().iter().find(|e| e["name"] == name).unwrap().clone();
        let (mut cluster, mut user) = (pick("clusters", member), pick("users", &format!("{member}-admin")));
        cluster["name"] = "remote".into();
        user["name"] = "someone".into();
        let kubeconfig = serde_json::json!({"apiVersion": "v1", "kind": "Config", "clusters": [cluster], "users": [user],
            "contexts": [{"name": "whatever", "context": {"cluster": "remote", "user": "someone"}}], "current-context": "whatever"});
        let secret = serde_json::json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": format!("creds-{member}"), "labels": {"flotilla.dev/cluster": member}},
            "stringData": {"kubeconfig": serde_json::to_string(&kubeconfig).unwrap()}});
        Api::<Secret>::namespaced(host.clone(), ns)
            .patch(&format!("creds-{member}"), &ssa, &Patch::Apply(secret))
            .await
            .unwrap();
    }
    let only_two = fleet("e2e-via-secrets", &[("creds", &["member1", "member2"])])
        .split("---\n")
        .filter(|d| !d.contains("name: member3"))
        .collect::<Vec<_>>()
        .join("---\n");
    let repo = serve(&only_two);
    let http_port = free_port();
    let cache = tempfile::tempdir().unwrap();
    let kubeconfig = members.kubeconfig().to_str().unwrap().to_owned();
    let _controller = Running(
        run_from_daemon(repo.port)
            .args(["--instance", "secrets"])
            .args([
                "--member-secrets",
                "--host-kubeconfig",
                &kubeconfig,
                "--host-context",
                "member3",
                "--namespace",
                ns,
            ])
            .args(["--listen", &format!("127.0.0.1:{http_port}"), "--cache-dir", cache.path().to_str().unwrap()])
            .env_remove("KUBECONFIG")
            .quiet(),
    );
    wait_for("the controller to apply through Secret credentials", Duration::from_secs(60), || async {
        ready(http_port)
    })
    .await;
    for member in ["member1", "member2"] {
        let cms: Api<ConfigMap> = Api::namespaced(members.client(member).await, "e2e-via-secrets");
        assert!(cms.get_opt("creds").await.unwrap().is_some(), "{member}");
    }
}

/// A local repository is watched: a commit applies without waiting for the poll.
#[tokio::test(flavor = "multi_thread")]
async fn a_local_repository_is_picked_up_on_commit() {
    let members = members();
    let ns = "e2e-local";
    let work = tempfile::tempdir().unwrap();
    git(work.path(), &["init", "-q", "-b", "main"]);
    write(work.path(), "fleet.yaml", fleet(ns, &[("one", &["member1"])]).as_bytes());
    commit_local(work.path(), "one");
    let (_controller, http_port) =
        run_on_members(&["--repo", work.path().to_str().unwrap(), "--interval", "60", "--instance", "local"]);
    wait_for("the first revision", Duration::from_secs(60), || async { ready(http_port) }).await;
    write(work.path(), "fleet.yaml", fleet(ns, &[("one", &["member1"]), ("two", &["member1"])]).as_bytes());
    commit_local(work.path(), "two");
    let cms: Api<ConfigMap> = Api::namespaced(members.client("member1").await, ns);
    wait_for("the local commit to apply (poll interval is 60 s)", Duration::from_secs(15), || async {
        cms.get_opt("two").await.unwrap().is_some()
    })
    .await;
}

/// The controller feeds each render's placements to the next, so a dynamic-weight
/// workload keeps its distribution when its affinity widens (Karmada's steady mode:
/// assigned == desired keeps the assignment); a fresh schedule would spread it 2/2/2.
#[tokio::test(flavor = "multi_thread")]
async fn divided_placements_carry_over_between_revisions() {
    use k8s_openapi::api::apps::v1::Deployment;

    let members = members();
    let ns = "e2e-steady";
    let repo = |clusters: &str| {
        let base = fleet(ns, &[]);
        format!(
            "{base}---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n  replicas: 6\n  selector: {{matchLabels: {{app: w}}}}\n  template:\n    metadata: {{labels: {{app: w}}}}\n    spec: {{containers: [{{name: c, image: nginx}}]}}\n---\napiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n  resourceSelectors: [{{apiVersion: apps/v1, kind: Deployment, name: web}}]\n  placement:\n    clusterAffinity: {{clusterNames: [{clusters}]}}\n    replicaScheduling: {{replicaSchedulingType: Divided, weightPreference: {{dynamicWeight: AvailableReplicas}}}}\n"
        )
    };
    let work = tempfile::tempdir().unwrap();
    git(work.path(), &["init", "-q", "-b", "main"]);
    write(work.path(), "fleet.yaml", repo("member1, member2").as_bytes());
    commit_local(work.path(), "two clusters");
    let (_controller, http_port) =
        run_on_members(&["--repo", work.path().to_str().unwrap(), "--interval", "1", "--instance", "steady"]);
    wait_for("the first revision", Duration::from_secs(60), || async { ready(http_port) }).await;
    let replicas = |member: &'static str| async move {
        let api: Api<Deployment> = Api::namespaced(members.client(member).await, ns);
        api.get_opt("web").await.unwrap().and_then(|d| d.spec).and_then(|s| s.replicas)
    };
    assert_eq!((replicas("member1").await, replicas("member2").await), (Some(3), Some(3)));
    write(work.path(), "fleet.yaml", repo("member1, member2, member3").as_bytes());
    commit_local(work.path(), "three clusters");
    let status = || async { http(http_port, "GET", "/status", &[], b"").1 };
    let head = || {
        let out = Command::new("git").args(["rev-parse", "HEAD"]).current_dir(work.path()).output().unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let want = head();
    wait_for("the widened revision", Duration::from_secs(20), || async {
        status().await.contains(&format!("\"applied\":\"{want}\""))
    })
    .await;
    assert_eq!(
        (replicas("member1").await, replicas("member2").await, replicas("member3").await),
        (Some(3), Some(3), None),
        "steady mode keeps 3/3 instead of reshuffling to 2/2/2"
    );
}

/// What prune leaves alone is visible: an object kept by its opt-out annotation, and a
/// refusal over the deletion budget, in `/status`, `/metrics` and `flotilla status`.
#[tokio::test(flavor = "multi_thread")]
async fn prune_refusals_and_kept_objects_are_reported() {
    let members = members();
    let ns = "e2e-refused";
    let names = ["x1", "x2", "x3", "x4"];
    let placed = |names: &[&'static str]| fleet(ns, &names.iter().map(|n| (*n, &["member1"][..])).collect::<Vec<_>>());
    let work = tempfile::tempdir().unwrap();
    git(work.path(), &["init", "-q", "-b", "main"]);
    write(work.path(), "fleet.yaml", placed(&names).as_bytes());
    commit_local(work.path(), "four");
    let (_controller, port) =
        run_on_members(&["--repo", work.path().to_str().unwrap(), "--interval", "1", "--instance", "refused"]);
    wait_for("the first revision", Duration::from_secs(60), || async { ready(port) }).await;
    let cms: Api<ConfigMap> = Api::namespaced(members.client("member1").await, ns);
    let keep = serde_json::json!({"metadata": {"annotations": {"flotilla.dev/prune": "disabled"}}});
    cms.patch("x4", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(keep)).await.unwrap();
    let status = || async move { http(port, "GET", "/status", &[], b"").1 };

    write(work.path(), "fleet.yaml", placed(&names[..3]).as_bytes());
    commit_local(work.path(), "x4 leaves");
    wait_for("x4 reported kept", Duration::from_secs(30), || async {
        status().await.contains("v1/ConfigMap/e2e-refused/x4: prune disabled by an annotation")
    })
    .await;
    assert!(cms.get_opt("x4").await.unwrap().is_some());
    let metrics = http(port, "GET", "/metrics", &[], b"").1;
    assert!(metrics.contains("flotilla_kept_objects_total{cluster=\"member1\"} 1"), "{metrics}");

    // Three of the four left (the Namespace stays) is over the 50% budget: refused, and
    // said so everywhere.
    write(work.path(), "fleet.yaml", placed(&[]).as_bytes());
    commit_local(work.path(), "x1, x2 and x3 leave");
    wait_for("the refusal in /status", Duration::from_secs(30), || async {
        status().await.contains("over the deletion budget")
    })
    .await;
    let metrics = http(port, "GET", "/metrics", &[], b"").1;
    assert!(metrics.lines().any(|l| l == "flotilla_prune_refused{cluster=\"member1\"} 1"), "{metrics}");
    let (code, out, _) = crate::support::run(&["status", "--controller", &format!("http://127.0.0.1:{port}")]);
    assert_eq!(code, 1, "a refusal needs attention:\n{out}");
    assert!(out.lines().any(|l| l.trim_start().starts_with("prune refused: pruning 3 of 4")), "{out}");
    assert!(cms.get_opt("x1").await.unwrap().is_some() && cms.get_opt("x3").await.unwrap().is_some());
}

/// With `--verify-commits`, only heads signed (by real `git`, `gpg.format ssh`) with an
/// allowed key are applied: an unsigned head, or one signed by a stranger, leaves the
/// last good revision applied, and `/status` and the metrics say why.
#[tokio::test(flavor = "multi_thread")]
async fn only_heads_signed_by_an_allowed_key_are_applied() {
    let members = members();
    let ns = "e2e-signed";
    let keys = tempfile::tempdir().unwrap();
    let keygen = |name: &str| {
        let key = keys.path().join(name);
        let made = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f", key.to_str().unwrap()])
            .status()
            .expect("ssh-keygen (openssh-client; hack/test.sh installs it)");
        assert!(made.success());
        key
    };
    let (trusted, stranger) = (keygen("trusted"), keygen("stranger"));
    let public = std::fs::read_to_string(trusted.with_extension("pub")).unwrap();
    let allowed = keys.path().join("allowed_signers");
    std::fs::write(&allowed, format!("release@example.invalid namespaces=\"git\" {public}")).unwrap();
    let signed_push = |work: &Path, key: &Path, message: &str| {
        git(work, &["add", "-A"]);
        let signing = format!("user.signingkey={}", key.display());
        git(
            work,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@example.invalid",
                "-c",
                "gpg.format=ssh",
                "-c",
                &signing,
                "commit",
                "-S",
                "-qm",
                message,
            ],
        );
        git(work, &["push", "-q", "origin", "HEAD:main"]);
    };

    // The initial commit is unsigned: nothing is applied.
    let repo = serve(&fleet(ns, &[("first", &["member1"])]));
    let http_port = free_port();
    let cache = tempfile::tempdir().unwrap();
    let _controller = Running(
        run_from_daemon(repo.port)
            .args(["--interval", "1", "--instance", "signed", "--verify-commits", allowed.to_str().unwrap()])
            .args(["--kubeconfig", members.kubeconfig().to_str().unwrap()])
            .args(["--listen", &format!("127.0.0.1:{http_port}"), "--cache-dir", cache.path().to_str().unwrap()])
            .quiet(),
    );
    let status = || http(http_port, "GET", "/status", &[], b"").1;
    wait_for("the controller to listen", Duration::from_secs(30), || async {
        TcpStream::connect(("127.0.0.1", http_port)).is_ok()
    })
    .await;
    wait_for("the unsigned head to be refused", Duration::from_secs(60), || async {
        status().contains("is not signed")
    })
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(members.client("member1").await, ns);
    assert!(cms.get_opt("first").await.unwrap().is_none(), "an unsigned head is not applied");

    write(repo.work.path(), "fleet.yaml", fleet(ns, &[("first", &["member1"]), ("second", &["member1"])]).as_bytes());
    signed_push(repo.work.path(), &trusted, "signed");
    wait_for("the signed head to apply", Duration::from_secs(30), || async {
        cms.get_opt("second").await.unwrap().is_some()
    })
    .await;

    write(repo.work.path(), "fleet.yaml", fleet(ns, &[("third", &["member1"])]).as_bytes());
    signed_push(repo.work.path(), &stranger, "signed by a stranger");
    wait_for("the stranger's head to be refused", Duration::from_secs(30), || async {
        status().contains("not in the allowed signers")
    })
    .await;
    assert!(cms.get_opt("third").await.unwrap().is_none() && cms.get_opt("second").await.unwrap().is_some());
    let metrics = http(http_port, "GET", "/metrics", &[], b"").1;
    assert!(metrics.contains("reason=\"unverified\""), "{metrics}");
}
