//! Failover on real members: a member's API server stops, the controller finds it not
//! Ready, taints it, and after the workload's toleration moves its replicas to the
//! others (kube-controller-manager and kwok make them ready there); the member comes
//! back with nothing lost. A Pull member whose agent stops renewing its heartbeat goes
//! Unknown and is handled alike. `render --simulate-failure` says the same offline.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::Value;

use crate::controller::{Quiet, Running, commit_and_push, free_port, http, serve};
use crate::members::{Dedicated, Members};
use crate::support::{commit_all, repo, run, run_from_daemon, wait_for, write};

/// Karmada's documented ClusterTaintPolicy: NoExecute while Ready is not True.
const TAINT_POLICY: &str = "apiVersion: policy.karmada.io/v1alpha1\nkind: ClusterTaintPolicy\nmetadata: {name: evict-not-ready}\nspec:\n  addOnConditions: [{conditionType: Ready, operator: NotIn, statusValues: ['True']}]\n  removeOnConditions: [{conditionType: Ready, operator: In, statusValues: ['True']}]\n  taints: [{key: cluster.karmada.io/not-ready, effect: NoExecute}]\n";

/// A Deployment divided `weight`:`weight`:`weight` over member1..3, tolerating
/// not-ready (and unreachable) NoExecute taints for 10 s, with `failover` as given.
fn workload(ns: &str, name: &str, replicas: i64, weight: i64, failover: &str) -> String {
    let rules: Vec<String> = (1..=3)
        .map(|m| format!("        - {{targetCluster: {{clusterNames: [member{m}]}}, weight: {weight}}}\n"))
        .collect();
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  replicas: {replicas}\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec: {{containers: [{{name: {name}, image: {name}}}]}}\n---\napiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  resourceSelectors: [{{apiVersion: apps/v1, kind: Deployment, name: {name}}}]\n  placement:\n    clusterAffinity: {{clusterNames: [member1, member2, member3]}}\n    clusterTolerations:\n    - {{key: cluster.karmada.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 10}}\n    - {{key: cluster.karmada.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 10}}\n    replicaScheduling:\n      replicaSchedulingType: Divided\n      replicaDivisionPreference: Weighted\n      weightPreference:\n        staticWeightList:\n{}{failover}",
        rules.concat()
    )
}

const GRACEFULLY: &str = "  failover: {cluster: {purgeMode: Gracefully}}\n";

/// `web` (9 replicas, opted in, weights `weight`), `steady` (3, not opted in) and a
/// ConfigMap everywhere.
fn fleet(ns: &str, weight: i64) -> String {
    [
        crate::apply::fleet(ns, &[("settings", &["member1", "member2", "member3"])]),
        TAINT_POLICY.to_owned(),
        workload(ns, "web", 9, weight, GRACEFULLY),
        workload(ns, "steady", 3, 1, ""),
    ]
    .join("---\n")
}

/// `readyReplicas` of Deployment `name` in `member` (0 when absent or unreachable).
async fn ready(members: &Members, member: &str, ns: &str, name: &str) -> i32 {
    let api: Api<Deployment> = Api::namespaced(members.client(member).await, ns);
    let got = tokio::time::timeout(Duration::from_secs(2), api.get_opt(name)).await;
    got.ok().and_then(Result::ok).flatten().and_then(|d| d.status).and_then(|s| s.ready_replicas).unwrap_or(0)
}

async fn exists<K>(members: &Members, member: &str, ns: &str, name: &str) -> bool
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(members.client(member).await, ns);
    api.get_opt(name).await.unwrap().is_some()
}

fn status(port: u16) -> Value {
    serde_json::from_str(&http(port, "GET", "/status", &[], b"").1).unwrap_or(Value::Null)
}

/// How member2 goes away in a trial.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Outage {
    /// SIGKILL: connections are refused at once.
    Killed,
    /// SIGSTOP: connections are accepted and never answered, as a hung API server or a
    /// black-holed network does; every request waits for its timeout.
    Frozen,
}

/// One trial: member2 goes away as `outage` says; returns the time until member1 and
/// member3 run all nine `web` replicas ready, having checked the survivors never ran
/// fewer than before, and what [`bring_back_member2`] needs.
async fn stop_member2(members: &Members, ns: &str, port: u16, outage: Outage) -> (Duration, Vec<OsString>) {
    let running = survivors(members, ns).await;
    let stopped = Instant::now();
    let command = match outage {
        Outage::Killed => members.kill("member2"),
        Outage::Frozen => {
            members.freeze("member2", true);
            Vec::new()
        }
    };
    let deadline = stopped + Duration::from_secs(120);
    loop {
        let now = survivors(members, ns).await;
        assert!(now >= running, "Gracefully: the survivors dropped from {running} to {now} ready");
        if now == 9 {
            break;
        }
        assert!(Instant::now() < deadline, "{outage:?}: nine replicas never ran elsewhere: {}", status(port));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    (stopped.elapsed(), command)
}

fn bring_back_member2(members: &Members, outage: Outage, command: &[OsString]) {
    match outage {
        Outage::Killed => members.restart("member2", command),
        Outage::Frozen => members.freeze("member2", false),
    }
}

/// Ready `web` replicas in member1 and member3.
async fn survivors(members: &Members, ns: &str) -> i32 {
    ready(members, "member1", ns, "web").await + ready(members, "member3", ns, "web").await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stopped_member_s_replicas_run_elsewhere_and_nothing_is_lost_when_it_returns() {
    // Dedicated members: this test stops member2's API server.
    let dedicated = Dedicated::start(3);
    let members = &dedicated.0;
    let ns = "e2e-failover";
    let served = serve(&fleet(ns, 1));
    let port = free_port();
    let cache = tempfile::tempdir().unwrap();
    let kubeconfig = members.kubeconfig().to_str().unwrap().to_owned();
    let _controller = Running(
        run_from_daemon(served.port)
            .args(["--interval", "1", "--instance", "failover", "--kubeconfig", &kubeconfig])
            .args(["--host-kubeconfig", &kubeconfig, "--host-context", "member1", "--namespace", "default"])
            .args(["--listen", &format!("127.0.0.1:{port}"), "--cache-dir", cache.path().to_str().unwrap()])
            .args(["--enable-no-execute-taint-eviction", "--allow-no-execute-taint-policy", "--eviction-rate", "10"])
            .args(["--cluster-status-update-frequency", "1s", "--cluster-monitor-period", "1s"])
            .args(["--cluster-failure-threshold", "3s", "--cluster-success-threshold", "3s"])
            .args(["--cluster-startup-grace-period", "5s", "--cluster-monitor-grace-period", "10s"])
            .arg("--ui")
            .quiet(),
    );
    let three_each = || async {
        for m in ["member1", "member2", "member3"] {
            if ready(members, m, ns, "web").await != 3 {
                return false;
            }
        }
        true
    };
    wait_for("3 ready web replicas in each member", Duration::from_secs(90), three_each).await;
    wait_for("every member Ready in /status", Duration::from_secs(15), || async {
        let health = &status(port)["health"];
        ["member1", "member2", "member3"].iter().all(|m| health[m]["ready"] == "True")
    })
    .await;

    // Each trial kills member2's API server once and freezes it once, interleaved, so
    // the two figures come from the same run on the same machine.
    let trials: usize = std::env::var("FLOTILLA_BENCH_TRIALS").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let mut took: BTreeMap<&str, Vec<Duration>> = BTreeMap::new();
    let outages = (0..trials).flat_map(|_| [Outage::Killed, Outage::Frozen]);
    for (trial, outage) in outages.enumerate() {
        let (elapsed, command) = stop_member2(members, ns, port, outage).await;
        took.entry(if outage == Outage::Killed { "killed" } else { "frozen" }).or_default().push(elapsed);
        let seen = status(port);
        assert_eq!(seen["health"]["member2"]["ready"], "False", "{seen}");
        let last = seen["failover"]["moves"].as_array().and_then(|m| m.last()).unwrap_or_else(|| panic!("{seen}"));
        assert_eq!(
            (last["object"].as_str(), last["from"].as_str()),
            (Some(&*format!("apps/v1/Deployment/{ns}/web")), Some("member2"))
        );
        assert!(last["reason"].as_str().unwrap().contains("past its 10s toleration"), "{last}");
        if trial == 0 {
            // The fleet page shows member2 not Ready, its taint, and the move.
            wait_for("the move on the fleet page", Duration::from_secs(5), || async {
                http(port, "GET", "/ui/failover", &[], b"").1.contains("past its 10s toleration")
            })
            .await;
            tokio::task::block_in_place(|| crate::browser::shoot(port, &[("/ui/failover", "Failover", "failover")]));
        }
        // No opt-in, no move; nothing left anywhere while member2 is away.
        for m in ["member1", "member3"] {
            assert_eq!(ready(members, m, ns, "steady").await, 1);
            assert!(exists::<ConfigMap>(members, m, ns, "settings").await);
        }

        // member2 returns: its taints go, its config and the unmoved workload are there;
        // the moved workload's old copy goes (purgeMode Gracefully, once the nine ran
        // elsewhere), and the nine stay where they went (Karmada's rule).
        bring_back_member2(members, outage, &command);
        wait_for("member2 Ready without taints", Duration::from_secs(60), || async {
            let h = &status(port)["health"]["member2"];
            h["ready"] == "True" && h["taints"].as_array().is_some_and(Vec::is_empty)
        })
        .await;
        assert!(exists::<ConfigMap>(members, "member2", ns, "settings").await, "the outage deleted nothing");
        assert!(exists::<Deployment>(members, "member2", ns, "steady").await);
        wait_for("the old copy of web to leave member2", Duration::from_secs(30), || async {
            !exists::<Deployment>(members, "member2", ns, "web").await
        })
        .await;
        assert_eq!(survivors(members, ns).await, 9, "the replicas stay where they went");
        let printed = run(&["status", "--controller", &format!("http://127.0.0.1:{port}")]).1;
        assert!(
            printed.contains("evicted apps/v1/Deployment/") && printed.contains("moved apps/v1/Deployment/"),
            "{printed}"
        );

        // A placement change in Git reschedules (weights 1:1:1 ⇄ 2:2:2 divide alike):
        // the eviction ends and member2 gets its share back.
        write(served.work.path(), "fleet.yaml", fleet(ns, if trial % 2 == 0 { 2 } else { 1 }).as_bytes());
        commit_and_push(served.work.path(), &format!("reschedule {trial}"));
        let back = Instant::now();
        while !three_each().await {
            // After a kill, the member's controller-manager takes up to a minute to list and
            // watch again (client-go's backoff), so its pods come back later than after a freeze.
            if back.elapsed() > Duration::from_secs(150) {
                let mut seen = Vec::new();
                for m in ["member1", "member2", "member3"] {
                    let api: Api<Deployment> = Api::namespaced(members.client(m).await, ns);
                    let web = api.get_opt("web").await.ok().flatten();
                    seen.push(format!(
                        "{m}: {:?} / {:?}",
                        web.as_ref().and_then(|d| d.spec.as_ref()?.replicas),
                        web.and_then(|d| d.status)
                    ));
                }
                panic!(
                    "{outage:?} trial {trial}: 3 ready web replicas in each member never came back: {seen:#?}\n{}",
                    status(port)
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        eprintln!("failover: trial {trial}, {outage:?}: {elapsed:?}; back in {:?}", back.elapsed());
    }
    for (outage, mut took) in took {
        took.sort();
        eprintln!(
            "failover: member2 {outage} → 9 ready in member1+member3, over {} trials: p50 {:.1} s, all {took:?}",
            took.len(),
            took[took.len() / 2].as_secs_f64()
        );
    }
}

/// Application failover moves what broke, never what never worked: `starting` (its
/// pods can never be scheduled) stays in its members however long, while `broken`,
/// healthy in member1 and then not at the same generation (a ResourceQuota forbids its
/// pods once they are deleted), leaves member1 after its 3 s toleration.
#[tokio::test(flavor = "multi_thread")]
async fn application_failover_moves_a_workload_that_broke_but_never_one_that_never_started() {
    let members = crate::members::members();
    let ns = &format!("e2e-failover-app-{}", std::process::id());
    let app = "  failover: {application: {decisionConditions: {tolerationSeconds: 3}, purgeMode: Directly}}\n";
    let starting = workload(ns, "starting", 3, 1, app)
        .replace("spec: {containers:", "spec: {nodeSelector: {flotilla.dev/test: nowhere}, containers:");
    let served = serve(&[crate::apply::fleet(ns, &[]), workload(ns, "broken", 3, 1, app), starting].join("---\n"));
    let kubeconfig = members.kubeconfig().to_str().unwrap().to_owned();
    let port = free_port();
    let cache = tempfile::tempdir().unwrap();
    let _controller = Running(
        run_from_daemon(served.port)
            .args(["--interval", "1", "--instance", "failover-app", "--kubeconfig", &kubeconfig])
            .args(["--host-kubeconfig", &kubeconfig, "--host-context", "member1", "--namespace", "default"])
            .args(["--listen", &format!("127.0.0.1:{port}"), "--cache-dir", cache.path().to_str().unwrap()])
            .args(["--enable-no-execute-taint-eviction", "--allow-no-execute-taint-policy", "--eviction-rate", "10"])
            .args(["--cluster-monitor-period", "1s", "--cluster-status-update-frequency", "1s"])
            .args(["--cluster-startup-grace-period", "2s", "--cluster-monitor-grace-period", "5s"])
            .quiet(),
    );
    wait_for("broken ready in every member, starting created", Duration::from_secs(60), || async {
        let mut all = true;
        for m in ["member1", "member2", "member3"] {
            all &= ready(members, m, ns, "broken").await == 1 && exists::<Deployment>(members, m, ns, "starting").await;
        }
        all
    })
    .await;
    let moves = |port| status(port)["failover"]["moves"].as_array().cloned().unwrap_or_default();
    // Five tolerations and more: a workload still starting is not failing.
    tokio::time::sleep(Duration::from_secs(15)).await;
    assert!(moves(port).is_empty(), "{}", status(port));
    for m in ["member1", "member2", "member3"] {
        assert!(exists::<Deployment>(members, m, ns, "starting").await, "starting stays in {m}");
    }

    // member1 stops running `broken`'s pods at the same generation.
    let client = members.client("member1").await;
    let quota: k8s_openapi::api::core::v1::ResourceQuota =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "no-pods"}, "spec": {"hard": {"pods": "0"}}}))
            .unwrap();
    let quotas: Api<k8s_openapi::api::core::v1::ResourceQuota> = Api::namespaced(client.clone(), ns);
    quotas.create(&Default::default(), &quota).await.unwrap();
    // Until the quota controller has counted the namespace, the API server may not yet
    // hold the quota against a pod the ReplicaSet re-creates at once (it was seen
    // admitted under load, and `broken` never broke): wait for its status.
    wait_for("the quota counted", Duration::from_secs(30), || async {
        let got = quotas.get("no-pods").await.ok();
        got.and_then(|q| q.status?.hard).is_some_and(|hard| hard.contains_key("pods"))
    })
    .await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client, ns);
    pods.delete_collection(&Default::default(), &kube::api::ListParams::default().labels("app=broken")).await.unwrap();
    let broke = Instant::now();
    let left = |port| {
        moves(port).iter().any(|m| m["object"] == format!("apps/v1/Deployment/{ns}/broken") && m["from"] == "member1")
    };
    while !left(port) {
        if broke.elapsed() > Duration::from_secs(60) {
            let api: Api<Deployment> = Api::namespaced(members.client("member1").await, ns);
            let seen = api.get_opt("broken").await.ok().flatten().map(|d| (d.metadata.generation, d.status));
            let pods = pods.list(&Default::default()).await.map(|l| l.items.len());
            panic!("broken never left member1 in 60 s; there: {seen:?}, pods {pods:?}\n{}", status(port));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("application failover: broken in member1 → moved after {:?}", broke.elapsed());
    let all = moves(port);
    assert_eq!(all.len(), 1, "only broken moved: {all:?}");
    assert!(all[0]["reason"].as_str().unwrap().contains("unhealthy for"), "{all:?}");
}

/// The same fleet with member3 in Pull mode: its agent renews a heartbeat Lease in the
/// push controller's host cluster; when the agent stops, member3 goes Unknown, and
/// `web` moves to member1 and member2.
#[tokio::test(flavor = "multi_thread")]
async fn a_pull_member_whose_agent_stops_renewing_goes_unknown_and_its_replicas_move() {
    let members = crate::members::members();
    let ns = "e2e-failover-pull";
    let pull = |text: String| {
        text.replace(
            "metadata: {name: member3}\nspec: {syncMode: Push}",
            "metadata: {name: member3}\nspec: {syncMode: Pull}",
        )
    };
    let served = serve(&pull(fleet(ns, 1)));
    let kubeconfig = members.kubeconfig().to_str().unwrap().to_owned();
    let host = ["--host-kubeconfig", &kubeconfig, "--host-context", "member1", "--namespace", "default"];
    let (port, agent_port) = (free_port(), free_port());
    let (cache, agent_cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let _controller = Running(
        run_from_daemon(served.port)
            .args(["--interval", "1", "--instance", "failover-pull", "--kubeconfig", &kubeconfig])
            .args(host)
            .args(["--listen", &format!("127.0.0.1:{port}"), "--cache-dir", cache.path().to_str().unwrap()])
            .args(["--enable-no-execute-taint-eviction", "--allow-no-execute-taint-policy", "--eviction-rate", "10"])
            .args(["--cluster-monitor-period", "1s", "--cluster-monitor-grace-period", "5s"])
            .args(["--cluster-startup-grace-period", "5s", "--cluster-status-update-frequency", "1s"])
            .quiet(),
    );
    let agent = Running(
        run_from_daemon(served.port)
            .args(["--interval", "1", "--instance", "failover-pull", "--agent", "member3", "--kubeconfig", &kubeconfig])
            .args(["--allow-no-execute-taint-policy"])
            .args(["--heartbeat-kubeconfig", &kubeconfig, "--heartbeat-context", "member1", "--namespace", "default"])
            .args(["--heartbeat-interval", "1s"])
            .args(["--listen", &format!("127.0.0.1:{agent_port}"), "--cache-dir", agent_cache.path().to_str().unwrap()])
            .quiet(),
    );
    let replicas = |member: &'static str| async move {
        let api: Api<Deployment> = Api::namespaced(members.client(member).await, ns);
        api.get_opt("web").await.ok().flatten().and_then(|d| d.spec).and_then(|s| s.replicas).unwrap_or(0)
    };
    wait_for("web on every member, member3 by its agent", Duration::from_secs(60), || async {
        replicas("member1").await == 3 && replicas("member2").await == 3 && replicas("member3").await == 3
    })
    .await;
    wait_for("member3 Ready by its heartbeat", Duration::from_secs(20), || async {
        status(port)["health"]["member3"]["ready"] == "True"
    })
    .await;
    drop(agent);
    let stopped = Instant::now();
    wait_for("member3 Unknown, tainted unreachable", Duration::from_secs(30), || async {
        let h = &status(port)["health"]["member3"];
        h["ready"] == "Unknown"
            && h["taints"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t == "cluster.karmada.io/unreachable:NoSchedule"))
    })
    .await;
    wait_for("web's nine replicas on member1 and member2", Duration::from_secs(40), || async {
        replicas("member1").await + replicas("member2").await == 9
    })
    .await;
    eprintln!("failover: member3's agent stopped → its share placed on member1+member2 after {:?}", stopped.elapsed());
    assert_eq!(replicas("member3").await, 3, "nothing in member3 is touched: it is its agent's to apply");
    let moves = &status(port)["failover"]["moves"];
    assert_eq!(moves[0]["from"], "member3", "{moves}");
}

#[test]
fn render_simulate_failure_lists_what_moves_and_renders_it() {
    let ns = "sim";
    let dir = repo(&[("fleet.yaml", fleet(ns, 1).as_bytes())]);
    let path = dir.path().to_str().unwrap();
    // A NoExecute ClusterTaintPolicy loads only where the instance admits it, as
    // Karmada's webhook refuses it by default.
    let (code, _, err) = run(&["render", path]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("fleet.yaml: document") && err.contains("--allow-no-execute-taint-policy"), "{err}");
    let (code, out, err) =
        run(&["render", path, "--allow-no-execute-taint-policy", "--simulate-failure", "member2", "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("simulated failure of member2: 1 workload(s) move"), "{err}");
    assert!(err.contains(&format!("apps/v1/Deployment/{ns}/web: member1 3→")) && err.contains("member2 3→0"), "{err}");
    let plan: Value = serde_json::from_str(&out).unwrap();
    let on = |member: &str| -> BTreeMap<String, Value> {
        plan["clusters"][member]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| (m["metadata"]["name"].as_str().unwrap().to_owned(), m["spec"]["replicas"].clone()))
            .collect()
    };
    assert!(
        !on("member2").contains_key("web")
            && on("member2").contains_key("steady")
            && on("member2").contains_key("settings")
    );
    let web = on("member1")["web"].as_i64().unwrap() + on("member3")["web"].as_i64().unwrap();
    assert_eq!(web, 9);
    let (code, _, err) = run(&["render", path, "--allow-no-execute-taint-policy", "--simulate-failure", "member9"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cluster member9 is not declared"), "{err}");

    // A grace period shorter than two probes would flap members to Unknown: refused.
    let (code, _, err) =
        run(&["run", "--repo", path, "--kubeconfig", "/dev/null", "--cluster-monitor-grace-period", "5s"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--cluster-monitor-grace-period (5s) must be at least twice"), "{err}");

    // A plan of the same commit under member2's failure: exactly what moves.
    let head = commit_all(dir.path(), "fleet");
    let (code, out, err) = run(&[
        "diff",
        path,
        "--from",
        &head,
        "--to",
        &head,
        "--allow-no-execute-taint-policy",
        "--simulate-failure",
        "member2",
        "-o",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    let diff: Value = serde_json::from_str(&out).unwrap();
    let names = |member: &str, what: &str| -> Vec<String> {
        let entries = diff["clusters"][member][what].as_array().cloned().unwrap_or_default();
        entries.iter().map(|e| e["name"].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(names("member2", "removed"), ["web"], "{diff}");
    assert_eq!(
        (names("member1", "changed"), names("member3", "changed")),
        (vec!["web".to_owned()], vec!["web".to_owned()])
    );
    assert!(diff["clusters"]["member2"]["changed"].as_array().is_none_or(Vec::is_empty), "{diff}");
}
