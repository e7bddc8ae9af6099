//! Rollouts on real members (docs/rollouts.md): a commit reaches the canary first and
//! the rest only after the canary's soak; a gate read from a real Prometheus halts the
//! rollout and reverts it, or pauses it until `flotilla rollout resume`; a standby
//! continues where a killed leader stood; a deny window holds a wave; a newer commit
//! supersedes the rollout in progress.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::Value;

use crate::controller::{Quiet, Running, commit_and_push, free_port, http, serve};
use crate::members::{Members, members};
use crate::support::{run, run_from_daemon, tool, wait_for, write};

const MEMBERS: [&str; 3] = ["member1", "member2", "member3"];

/// Namespace `ns` on three members: Deployment `web` (one replica in each, `image`) and
/// ConfigMap `web-config` (`color`), both governed by RolloutPolicy `web` with `spec`.
fn repo(ns: &str, image: &str, color: &str, spec: &str) -> String {
    let clusters: String = (1..=3)
        .map(|m| format!("apiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {{name: member{m}}}\nspec: {{syncMode: Push}}\n---\n"))
        .collect();
    format!(
        "{clusters}apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n---
apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: {ns}}}
spec:\n  replicas: 1\n  selector: {{matchLabels: {{app: web}}}}
  template:\n    metadata: {{labels: {{app: web}}}}\n    spec: {{containers: [{{name: web, image: \"{image}\"}}]}}\n---
apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: web-config, namespace: {ns}}}\ndata: {{color: {color}}}\n---
apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: web, namespace: {ns}}}
spec:\n  resourceSelectors: [{{apiVersion: apps/v1, kind: Deployment}}, {{apiVersion: v1, kind: ConfigMap}}]
  placement: {{clusterAffinity: {{clusterNames: [member1, member2, member3]}}}}\n---
apiVersion: flotilla.dev/v1alpha1\nkind: RolloutPolicy\nmetadata: {{name: web, namespace: {ns}}}
spec:\n  resourceSelectors: [{{apiVersion: apps/v1, kind: Deployment, name: web}}, {{apiVersion: v1, kind: ConfigMap, name: web-config}}]
{spec}"
    )
}

/// Waves `canary` (member1), then `rest` (member2 and member3).
const CANARY_THEN_REST: &str = "  waves: [{name: canary, clusterAffinity: {clusterNames: [member1]}}, {name: rest, clusterAffinity: {clusterNames: [member2, member3]}}]\n";

/// The image of `web` and the colour of `web-config` in `member`.
async fn version(members: &Members, member: &str, ns: &str) -> (Option<String>, Option<String>) {
    let client = members.client(member).await;
    let web = Api::<Deployment>::namespaced(client.clone(), ns).get_opt("web").await.ok().flatten();
    let image = web.and_then(|d| d.spec?.template.spec?.containers.first()?.image.clone());
    let config = Api::<ConfigMap>::namespaced(client, ns).get_opt("web-config").await.ok().flatten();
    (image, config.and_then(|c| c.data?.get("color").cloned()))
}

/// Whether `member` runs `image` and `color` (both: never a mix).
async fn runs(members: &Members, member: &str, ns: &str, (image, color): (&str, &str)) -> bool {
    let (i, c) = version(members, member, ns).await;
    (i.as_deref(), c.as_deref()) == (Some(image), Some(color))
}

fn status(port: u16) -> Value {
    serde_json::from_str(&http(port, "GET", "/status", &[], b"").1).unwrap_or_default()
}

fn rollout(port: u16, ns: &str) -> Value {
    status(port)["rollouts"][format!("RolloutPolicy {ns}/web")].clone()
}

/// An RFC 3339 time in `/status` as a wall-clock time.
fn wall(value: &Value) -> SystemTime {
    let at: k8s_openapi::jiff::Timestamp =
        value.as_str().unwrap_or_else(|| panic!("no time: {value}")).parse().unwrap();
    SystemTime::UNIX_EPOCH + Duration::from_millis(at.as_millisecond() as u64)
}

/// A controller of `instance` following `served` every second, with its state in
/// member1, rollouts monitored every second.
fn controller(served: u16, instance: &str, port: u16, cache: &tempfile::TempDir, extra: &[&str]) -> Running {
    let kubeconfig = members().kubeconfig().to_str().unwrap().to_owned();
    Running(
        run_from_daemon(served)
            .args(["--interval", "1s", "--instance", instance, "--kubeconfig", &kubeconfig])
            .args(["--host-kubeconfig", &kubeconfig, "--host-context", "member1", "--namespace", "default"])
            .args(["--listen", &format!("127.0.0.1:{port}"), "--cache-dir", cache.path().to_str().unwrap()])
            .args(["--rollout-monitor-period", "1s"])
            .args(extra)
            .quiet(),
    )
}

/// Waits until every member runs `version` of `ns`'s objects, with `web` ready.
async fn everywhere(members: &Members, ns: &str, version: (&str, &str), limit: Duration) {
    wait_for(&format!("{version:?} everywhere"), limit, || async {
        for member in MEMBERS {
            let api: Api<Deployment> = Api::namespaced(members.client(member).await, ns);
            let ready = api.get_opt("web").await.ok().flatten().and_then(|d| d.status?.ready_replicas) == Some(1);
            if !ready || !runs(members, member, ns, version).await {
                return false;
            }
        }
        true
    })
    .await;
}

/// Polls every 200 ms until `done`, failing at once if `never` holds of a member.
async fn watching<F, Fut>(members: &Members, ns: &str, limit: Duration, never: (&[&str], (&str, &str)), mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        for member in never.0 {
            let seen = version(members, member, ns).await;
            assert!(
                (seen.0.as_deref(), seen.1.as_deref()) != (Some(never.1.0), Some(never.1.1)),
                "{member} received {:?}",
                never.1
            );
        }
        if done().await {
            return;
        }
        assert!(start.elapsed() < limit, "timed out after {limit:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

const V1: (&str, &str) = ("web:1", "blue");
const V2: (&str, &str) = ("web:2", "green");
const V3: (&str, &str) = ("web:3", "red");

/// Commit after commit (`FLOTILLA_BENCH_TRIALS`, default 1; hack/bench-rollout.sh asks
/// for more), each reaching the canary first and the rest only after 20 s of the canary
/// standing at it: the times `/status` gives are those the members saw.
#[tokio::test(flavor = "multi_thread")]
async fn a_commit_reaches_the_canary_first_and_the_rest_after_its_soak() {
    let (members, ns) = (members(), "e2e-rollout-waves");
    let spec = format!("{CANARY_THEN_REST}  minSuccessTime: 20s\n");
    let served = serve(&repo(ns, V1.0, V1.1, &spec));
    let (port, cache) = (free_port(), tempfile::tempdir().unwrap());
    let _controller = controller(served.port, "rollout-waves", port, &cache, &[]);
    everywhere(members, ns, V1, Duration::from_secs(90)).await;
    let trials: usize = std::env::var("FLOTILLA_BENCH_TRIALS").ok().and_then(|t| t.parse().ok()).unwrap_or(1);
    let (mut canaries, mut transitions) = (Vec::new(), Vec::new());
    for trial in 0..trials {
        let (image, color) = (format!("web:{}", trial + 2), format!("c{}", trial + 2));
        write(served.work.path(), "fleet.yaml", repo(ns, &image, &color, &spec).as_bytes());
        commit_and_push(served.work.path(), &image);
        let (canary, transition) = waves(members, ns, port, (&image, &color)).await;
        eprintln!("rollout: trial {trial}: push → canary {canary:?}; soak end → next wave applied {transition:?}");
        canaries.push(canary);
        transitions.push(transition);
    }
    canaries.sort();
    transitions.sort();
    let p = |v: &[Duration], q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    eprintln!(
        "rollout: {trials} commits: push → canary p50 {:?} p99 {:?}; soak end → next wave applied p50 {:?} p99 {:?}",
        p(&canaries, 0.5),
        p(&canaries, 0.99),
        p(&transitions, 0.5),
        p(&transitions, 0.99)
    );
}

/// Follows one commit of `new` through the two waves; returns push → canary, and the
/// canary's soak done → the rest at the revision.
async fn waves(members: &Members, ns: &str, port: u16, new: (&str, &str)) -> (Duration, Duration) {
    let pushed = SystemTime::now();
    let rest: &[&str] = &["member2", "member3"];
    let canary = std::sync::OnceLock::new();
    watching(members, ns, Duration::from_secs(60), (rest, new), || async {
        if canary.get().is_none() && runs(members, "member1", ns, new).await {
            let _ = canary.set(SystemTime::now());
        }
        let seen = rollout(port, ns);
        seen["state"] == "soaking" && seen["batch"] == 1 && seen["revision"] == status(port)["head"]
    })
    .await;
    let soaking = wall(&rollout(port, ns)["waves"][0]["soaking"]);
    // member2 and member3 stay where they were for the whole soak.
    watching(members, ns, Duration::from_secs(60), (rest, new), || async {
        SystemTime::now() > soaking + Duration::from_secs(19)
    })
    .await;
    let arrived = std::sync::OnceLock::new();
    wait_for("member2 and member3 at the revision", Duration::from_secs(30), || async {
        let there = runs(members, "member2", ns, new).await && runs(members, "member3", ns, new).await;
        if there {
            let _ = arrived.set(SystemTime::now());
        }
        there
    })
    .await;
    wait_for("the rollout finished", Duration::from_secs(60), || async { rollout(port, ns)["state"] == "idle" }).await;
    let seen = rollout(port, ns);
    let waves = &seen["finished"]["waves"];
    let (canary, rest) = (*canary.get().expect("seen"), *arrived.get().expect("seen"));
    let (started, done, next) = (wall(&waves[0]["started"]), wall(&waves[0]["done"]), wall(&waves[1]["started"]));
    assert!(done.duration_since(wall(&waves[0]["soaking"])).unwrap() >= Duration::from_secs(20), "{seen}");
    assert!(rest >= next && next >= done, "{seen}");
    // The times in /status are the times the members saw (within the 200 ms polls and
    // one apply).
    let near = |a: SystemTime, b: SystemTime| {
        a.duration_since(b).or_else(|_| b.duration_since(a)).unwrap() < Duration::from_secs(3)
    };
    assert!(near(canary, started) && near(rest, next), "canary {canary:?} / {started:?}, rest {rest:?} / {next:?}");
    (canary.duration_since(pushed).unwrap(), rest.duration_since(done).unwrap())
}

/// A scrape target whose one gauge, `flotilla_test_errors`, the test sets.
struct Target {
    port: u16,
    value: Arc<AtomicU64>,
}

impl Target {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let (port, value) = (listener.local_addr().unwrap().port(), Arc::new(AtomicU64::new(0)));
        let shown = value.clone();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request);
                let body = format!(
                    "# TYPE flotilla_test_errors gauge\nflotilla_test_errors {}\n",
                    shown.load(Ordering::SeqCst)
                );
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes()).and_then(|_| stream.write_all(body.as_bytes()));
            }
        });
        Self { port, value }
    }

    fn set(&self, value: u64) {
        self.value.store(value, Ordering::SeqCst);
    }
}

/// A real Prometheus (Debian's package) scraping `target` every second.
struct Prometheus {
    port: u16,
    _process: Running,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(target: &Target) -> Self {
        let binary = tool("/usr/bin/prometheus", "prometheus");
        let (dir, port) = (tempfile::tempdir().unwrap(), free_port());
        let config = format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nscrape_configs:\n- job_name: test\n  static_configs: [{{targets: ['127.0.0.1:{}']}}]\n",
            target.port
        );
        std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
        let process = Running(
            std::process::Command::new(binary)
                .arg(format!("--config.file={}", dir.path().join("prometheus.yml").display()))
                .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        );
        Self { port, _process: process, _dir: dir }
    }

    /// The gauge's value as Prometheus answers it now.
    fn value(&self) -> Option<f64> {
        std::net::TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        let (_, body) = http(self.port, "GET", "/api/v1/query?query=flotilla_test_errors", &[], b"");
        let answer: Value = serde_json::from_str(&body).ok()?;
        answer["data"]["result"][0]["value"][1].as_str()?.parse().ok()
    }
}

/// A rollout gated on `flotilla_test_errors` (at most 1), soaking `soak`, with
/// `on_failure`.
fn gated(prometheus: &Prometheus, soak: &str, on_failure: &str) -> String {
    format!(
        "{CANARY_THEN_REST}  minSuccessTime: {soak}\n  onFailure: {on_failure}\n  gates:\n  - {{name: errors, prometheus: {{address: 'http://127.0.0.1:{}', query: flotilla_test_errors}}, max: 1}}\n",
        prometheus.port
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_breaching_gate_halts_the_canary_revert_sends_it_back_and_pause_holds_until_resumed() {
    let members = members();
    let target = Target::start();
    let prometheus = Prometheus::start(&target);
    wait_for("Prometheus scraping the target", Duration::from_secs(60), || async { prometheus.value() == Some(0.0) })
        .await;

    // Revert: the canary goes back to web:1; member2 and member3 never see web:2.
    let ns = "e2e-rollout-revert";
    let spec = gated(&prometheus, "60s", "Revert");
    let served = serve(&repo(ns, V1.0, V1.1, &spec));
    let (port, cache) = (free_port(), tempfile::tempdir().unwrap());
    let controller_ = controller(served.port, "rollout-revert", port, &cache, &["--ui"]);
    everywhere(members, ns, V1, Duration::from_secs(90)).await;
    write(served.work.path(), "fleet.yaml", repo(ns, V2.0, V2.1, &spec).as_bytes());
    commit_and_push(served.work.path(), "web 2");
    let rest: &[&str] = &["member2", "member3"];
    watching(members, ns, Duration::from_secs(60), (rest, V2), || async {
        runs(members, "member1", ns, V2).await && rollout(port, ns)["state"] == "soaking"
    })
    .await;
    target.set(5);
    let breached = Instant::now();
    watching(members, ns, Duration::from_secs(30), (rest, V2), || async { rollout(port, ns)["state"] == "halted" })
        .await;
    let halted = breached.elapsed();
    assert!(halted <= Duration::from_secs(10), "halted {halted:?} after the breach");
    let seen = rollout(port, ns);
    assert!(
        seen["reason"].as_str().unwrap_or_default().contains("gate errors = 5 (max 1)") && seen["reverted"] == true,
        "{seen}"
    );
    watching(members, ns, Duration::from_secs(30), (rest, V2), || async { runs(members, "member1", ns, V1).await })
        .await;
    let reverted = breached.elapsed();
    eprintln!("rollout: gate breach → halted {halted:?}, canary back at the last good revision {reverted:?}");
    // The fleet page shows the halt, the breaching gate with its value, and the revert.
    wait_for("the halt on the fleet page", Duration::from_secs(5), || async {
        let page = http(port, "GET", "/ui/rollouts", &[], b"").1;
        page.contains("halted") && page.contains("(failing)") && page.contains("reverted to")
    })
    .await;
    tokio::task::block_in_place(|| crate::browser::shoot(port, &[("/ui/rollouts", "Rollouts", "rollouts")]));
    drop(controller_);

    // Pause: the canary keeps web:2; resume goes on once the gate passes again.
    target.set(0);
    wait_for("the gauge back at 0", Duration::from_secs(30), || async { prometheus.value() == Some(0.0) }).await;
    let ns = "e2e-rollout-pause";
    let spec = gated(&prometheus, "15s", "Pause");
    let served = serve(&repo(ns, V1.0, V1.1, &spec));
    let (port, cache) = (free_port(), tempfile::tempdir().unwrap());
    let _controller = controller(served.port, "rollout-pause", port, &cache, &[]);
    everywhere(members, ns, V1, Duration::from_secs(90)).await;
    write(served.work.path(), "fleet.yaml", repo(ns, V2.0, V2.1, &spec).as_bytes());
    commit_and_push(served.work.path(), "web 2");
    watching(members, ns, Duration::from_secs(60), (rest, V2), || async {
        runs(members, "member1", ns, V2).await && rollout(port, ns)["state"] == "soaking"
    })
    .await;
    target.set(3);
    let breached = Instant::now();
    watching(members, ns, Duration::from_secs(30), (rest, V2), || async { rollout(port, ns)["state"] == "halted" })
        .await;
    assert!(breached.elapsed() <= Duration::from_secs(10), "halted {:?} after the breach", breached.elapsed());
    let held = Instant::now();
    watching(members, ns, Duration::from_secs(30), (rest, V2), || async { held.elapsed() > Duration::from_secs(5) })
        .await;
    assert!(runs(members, "member1", ns, V2).await, "a pause reverts nothing");
    assert_eq!(rollout(port, ns)["reverted"], false);
    target.set(0);
    wait_for("the gauge back at 0", Duration::from_secs(30), || async { prometheus.value() == Some(0.0) }).await;
    let kubeconfig = members.kubeconfig().to_str().unwrap().to_owned();
    let (code, _, err) = run(&[
        "rollout",
        "resume",
        &format!("{ns}/web"),
        "--host-kubeconfig",
        &kubeconfig,
        "--host-context",
        "member1",
        "--namespace",
        "default",
        "--instance",
        "rollout-pause",
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = run(&["rollout", "status", "--controller", &format!("http://127.0.0.1:{port}")]);
    assert!(code <= 1 && out.contains(&format!("RolloutPolicy {ns}/web")), "{code} {out} {err}");
    everywhere(members, ns, V2, Duration::from_secs(90)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_standby_continues_at_wave_two_when_the_leader_is_killed() {
    let (members, ns) = (members(), "e2e-rollout-standby");
    let spec = "  waves: [{name: first, clusterAffinity: {clusterNames: [member1]}}, {name: second, clusterAffinity: {clusterNames: [member2]}}]\n  minSuccessTime: 10s\n";
    let served = serve(&repo(ns, V1.0, V1.1, spec));
    let elect = ["--leader-elect", "--lease-duration", "4s"];
    let (ports, caches) = ([free_port(), free_port()], [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()]);
    let mut replicas: Vec<Option<Running>> =
        (0..2).map(|i| Some(controller(served.port, "rollout-standby", ports[i], &caches[i], &elect))).collect();
    everywhere(members, ns, V1, Duration::from_secs(90)).await;
    write(served.work.path(), "fleet.yaml", repo(ns, V2.0, V2.1, spec).as_bytes());
    commit_and_push(served.work.path(), "web 2");
    let leader = || ports.iter().position(|p| status(*p)["leading"] == true);
    wait_for("wave two under way", Duration::from_secs(90), || async {
        leader().is_some_and(|l| rollout(ports[l], ns)["batch"] == 2) && runs(members, "member2", ns, V2).await
    })
    .await;
    let old = leader().unwrap();
    let first = rollout(ports[old], ns)["waves"][0]["started"].clone();
    replicas[old].take();
    let standby = ports[1 - old];
    // member1 and member2 keep web:2 throughout; member3 (the rest) gets it after wave two.
    watching(members, ns, Duration::from_secs(90), (&[], V2), || async {
        assert!(
            runs(members, "member1", ns, V2).await && runs(members, "member2", ns, V2).await,
            "a moved member went back"
        );
        runs(members, "member3", ns, V2).await
    })
    .await;
    let seen = rollout(standby, ns);
    assert_eq!(status(standby)["leading"], true);
    let waves = if seen["finished"].is_object() { &seen["finished"]["waves"] } else { &seen["waves"] };
    assert_eq!(waves[0]["started"], first, "wave one was not started again: {seen}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deny_window_holds_a_wave_until_it_ends() {
    let (members, ns) = (members(), "e2e-rollout-window");
    // Denied for the first 30 s of every minute.
    let spec =
        format!("{CANARY_THEN_REST}  windows: [{{kind: deny, schedule: '* * * * *', duration: 30s, timeZone: UTC}}]\n");
    let served = serve(&repo(ns, V1.0, V1.1, &spec));
    let (port, cache) = (free_port(), tempfile::tempdir().unwrap());
    let _controller = controller(served.port, "rollout-window", port, &cache, &[]);
    everywhere(members, ns, V1, Duration::from_secs(90)).await;
    let second = || SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs() % 60;
    while !(2..12).contains(&second()) {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let minute = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs() / 60;
    write(served.work.path(), "fleet.yaml", repo(ns, V2.0, V2.1, &spec).as_bytes());
    commit_and_push(served.work.path(), "web 2");
    let opens = SystemTime::UNIX_EPOCH + Duration::from_secs(minute * 60 + 30);
    watching(members, ns, Duration::from_secs(40), (&MEMBERS, V2), || async {
        SystemTime::now() + Duration::from_millis(300) >= opens
    })
    .await;
    assert_eq!(rollout(port, ns)["windowsOpen"], false, "{}", rollout(port, ns));
    wait_for("the canary once the window closed", Duration::from_secs(15), || async {
        runs(members, "member1", ns, V2).await
    })
    .await;
    let late = SystemTime::now().duration_since(opens).unwrap_or_default();
    eprintln!("rollout: deny window ended → canary applied {late:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_newer_commit_supersedes_the_rollout_and_starts_at_the_canary() {
    let (members, ns) = (members(), "e2e-rollout-newer");
    let spec = format!("{CANARY_THEN_REST}  minSuccessTime: 10s\n");
    let served = serve(&repo(ns, V1.0, V1.1, &spec));
    let (port, cache) = (free_port(), tempfile::tempdir().unwrap());
    let _controller = controller(served.port, "rollout-newer", port, &cache, &[]);
    everywhere(members, ns, V1, Duration::from_secs(90)).await;
    write(served.work.path(), "fleet.yaml", repo(ns, V2.0, V2.1, &spec).as_bytes());
    commit_and_push(served.work.path(), "web 2");
    let rest: &[&str] = &["member2", "member3"];
    watching(members, ns, Duration::from_secs(60), (rest, V2), || async { runs(members, "member1", ns, V2).await })
        .await;
    write(served.work.path(), "fleet.yaml", repo(ns, V3.0, V3.1, &spec).as_bytes());
    commit_and_push(served.work.path(), "web 3");
    // web:3 starts over at the canary: the rest go from web:1 to web:3, never web:2.
    watching(members, ns, Duration::from_secs(30), (rest, V2), || async { runs(members, "member1", ns, V3).await })
        .await;
    assert!(runs(members, "member2", ns, V1).await && runs(members, "member3", ns, V1).await);
    watching(members, ns, Duration::from_secs(90), (rest, V2), || async {
        runs(members, "member2", ns, V3).await && runs(members, "member3", ns, V3).await
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pull_member_follows_its_wave_through_its_agent() {
    let (members, ns) = (members(), "e2e-rollout-pull");
    let spec = format!("{CANARY_THEN_REST}  minSuccessTime: 5s\n");
    let pull = |text: String| {
        text.replace(
            "metadata: {name: member3}\nspec: {syncMode: Push}",
            "metadata: {name: member3}\nspec: {syncMode: Pull}",
        )
    };
    let served = serve(&pull(repo(ns, V1.0, V1.1, &spec)));
    let (port, agent_port) = (free_port(), free_port());
    let (cache, agent_cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let _controller = controller(served.port, "rollout-pull", port, &cache, &[]);
    let kubeconfig = members.kubeconfig().to_str().unwrap().to_owned();
    let _agent = Running(
        run_from_daemon(served.port)
            .args(["--interval", "1s", "--instance", "rollout-pull", "--agent", "member3", "--kubeconfig", &kubeconfig])
            .args(["--heartbeat-kubeconfig", &kubeconfig, "--heartbeat-context", "member1", "--namespace", "default"])
            .args(["--heartbeat-interval", "1s", "--rollout-monitor-period", "1s"])
            .args(["--listen", &format!("127.0.0.1:{agent_port}"), "--cache-dir", agent_cache.path().to_str().unwrap()])
            .quiet(),
    );
    everywhere(members, ns, V1, Duration::from_secs(90)).await;
    write(served.work.path(), "fleet.yaml", pull(repo(ns, V2.0, V2.1, &spec)).as_bytes());
    commit_and_push(served.work.path(), "web 2");
    // member3's agent holds it at web:1 through the canary's soak.
    watching(members, ns, Duration::from_secs(60), (&["member2", "member3"], V2), || async {
        let seen = rollout(port, ns);
        runs(members, "member1", ns, V2).await && seen["state"] == "soaking" && seen["batch"] == 1
    })
    .await;
    let soaking = wall(&rollout(port, ns)["waves"][0]["soaking"]);
    watching(members, ns, Duration::from_secs(30), (&["member2", "member3"], V2), || async {
        SystemTime::now() > soaking + Duration::from_secs(4)
    })
    .await;
    // The rest moves, and the rollout ends on what member3's agent reports it runs.
    everywhere(members, ns, V2, Duration::from_secs(60)).await;
    wait_for("the rollout done, member3 included", Duration::from_secs(60), || async {
        let seen = rollout(port, ns);
        seen["state"] == "idle" && seen["finished"]["waves"][1]["clusters"].to_string().contains("member3")
    })
    .await;
}
