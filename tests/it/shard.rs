//! Members sharded over controller replicas (`--sharding`) on four real members: two
//! replicas own disjoint sets that together cover all four and a commit reaches every
//! member; one replica SIGKILLed, the other owns all four within the lease duration and
//! a retry period, the next commit reaches all four, and no member's audit log shows a
//! write from the dead replica after it died.

use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::Value;

use crate::controller::{Quiet, Running, commit_and_push, free_port, http, serve};
use crate::members::{Dedicated, Members};
use crate::support::{run_from_daemon, wait_for, write};

const MEMBERS: [&str; 4] = ["member1", "member2", "member3", "member4"];

/// A ConfigMap `web` in `ns` on all four members, its data `version`.
fn fleet(ns: &str, version: &str) -> String {
    fleet_on(ns, version, &MEMBERS)
}

/// A ConfigMap `web` in `ns` on `members`, its data `version`.
fn fleet_on(ns: &str, version: &str, members: &[&str]) -> String {
    let mut docs = vec![format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n")];
    for m in members {
        docs.push(format!("apiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {{name: {m}}}\nspec: {{syncMode: Push}}\n"));
    }
    docs.push(format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: web, namespace: {ns}}}\ndata: {{version: {version}}}\n"
    ));
    docs.push(format!(
        "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n\
         \x20 resourceSelectors: [{{apiVersion: v1, kind: ConfigMap, name: web}}]\n\
         \x20 placement: {{clusterAffinity: {{clusterNames: [{}]}}}}\n",
        members.join(", ")
    ));
    docs.join("---\n")
}

/// A replica of `instance` following `served`, its Leases in member1, sharding with a
/// 6 s lease.
fn replica(members: &Members, (served, instance): (u16, &str), port: u16, cache: &tempfile::TempDir) -> Running {
    let kubeconfig = members.kubeconfig().to_str().unwrap().to_owned();
    Running(
        run_from_daemon(served)
            .args(["--interval", "1", "--instance", instance, "--kubeconfig", &kubeconfig])
            .args(["--host-kubeconfig", &kubeconfig, "--host-context", "member1", "--namespace", "default"])
            .args(["--listen", &format!("127.0.0.1:{port}"), "--cache-dir", cache.path().to_str().unwrap()])
            .args(["--leader-elect", "--sharding", "--lease-duration", "6"])
            .quiet(),
    )
}

fn shard(port: u16) -> Value {
    if std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        return Value::Null;
    }
    let (_, body) = http(port, "GET", "/status", &[], b"");
    serde_json::from_str::<Value>(&body).map(|s| s["shard"].clone()).unwrap_or(Value::Null)
}

fn owned(port: u16) -> Vec<String> {
    shard(port)["clusters"].as_array().into_iter().flatten().filter_map(|c| c.as_str().map(str::to_owned)).collect()
}

async fn everywhere(members: &Members, ns: &str, version: &str) {
    wait_for(&format!("{version} in all four members"), Duration::from_secs(60), || async {
        for m in MEMBERS {
            let api: Api<ConfigMap> = Api::namespaced(members.client(m).await, ns);
            let data = api.get_opt("web").await.ok().flatten().and_then(|c| c.data).unwrap_or_default();
            if data.get("version").map(String::as_str) != Some(version) {
                return false;
            }
        }
        true
    })
    .await;
}

/// RFC 3339 in an audit event, as a system time.
fn at(event: &Value) -> SystemTime {
    let text = event["requestReceivedTimestamp"].as_str().unwrap_or_default();
    let stamp: k8s_openapi::jiff::Timestamp = text.parse().unwrap();
    SystemTime::from(stamp)
}

#[tokio::test(flavor = "multi_thread")]
async fn two_replicas_share_four_members_and_one_takes_them_all_when_the_other_is_killed() {
    let dedicated = Dedicated::start(4);
    let members = &dedicated.0;
    let ns = "e2e-shard";
    let served = serve(&fleet(ns, "v1"));
    let (ports, caches) = ([free_port(), free_port()], [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()]);
    let mut replicas: Vec<Option<Running>> =
        (0..2).map(|i| Some(replica(members, (served.port, "shard"), ports[i], &caches[i]))).collect();

    // Disjoint, and together all four.
    wait_for("both replicas to share the four members", Duration::from_secs(60), || async {
        let (a, b) = (owned(ports[0]), owned(ports[1]));
        let mut all: Vec<String> = a.iter().chain(&b).cloned().collect();
        all.sort();
        all == MEMBERS && shard(ports[0])["replicas"].as_array().is_some_and(|r| r.len() == 2)
    })
    .await;
    let shares = [owned(ports[0]), owned(ports[1])];
    eprintln!("shard: {:?} / {:?}", shares[0], shares[1]);
    everywhere(members, ns, "v1").await;
    write(served.work.path(), "fleet.yaml", fleet(ns, "v2").as_bytes());
    commit_and_push(served.work.path(), "v2");
    everywhere(members, ns, "v2").await;
    // `flotilla status` reads every replica: each one's share, and no member owned twice.
    let urls: Vec<String> = ports.iter().map(|p| format!("http://127.0.0.1:{p}")).collect();
    let (_, out, err) = crate::support::run(&["status", "--controller", &urls[0], "--controller", &urls[1]]);
    assert_eq!(out.matches("\nshard     ").count(), 2, "{out}{err}");
    assert!(out.contains("leads the fleet") && !out.contains("warning:"), "{out}");

    // The replica with more members dies: the other owns all four within the lease
    // duration and a retry period (and the round that sees it).
    let dead = if shares[0].len() >= shares[1].len() { 0 } else { 1 };
    let (alive, identity) = (1 - dead, shard(ports[dead])["replica"].as_str().unwrap().to_owned());
    let pid = replicas[dead].as_ref().unwrap().0.id().to_string();
    assert!(std::process::Command::new("kill").args(["-KILL", &pid]).status().unwrap().success());
    let (killed, killed_at) = (Instant::now(), SystemTime::now());
    drop(replicas[dead].take());
    wait_for("the survivor to own all four", Duration::from_secs(30), || async { owned(ports[alive]) == MEMBERS })
        .await;
    let took = killed.elapsed();
    let metrics = http(ports[alive], "GET", "/metrics", &[], b"").1;
    assert!(metrics.contains("flotilla_shard_members 4") && metrics.contains("flotilla_shard_replicas 1"), "{metrics}");
    eprintln!("shard: SIGKILL → the survivor owns every member after {took:?}");
    assert!(took <= Duration::from_millis(6_000 + 800 + 1_500), "within the lease duration and a retry: {took:?}");
    write(served.work.path(), "fleet.yaml", fleet(ns, "v3").as_bytes());
    commit_and_push(served.work.path(), "v3");
    everywhere(members, ns, "v3").await;

    // The audit logs: the dead replica wrote before it died (its User-Agent names it),
    // and nothing after.
    let writes = |by: &str| -> Vec<Value> {
        MEMBERS
            .iter()
            .flat_map(|m| members.audit(m))
            .filter(|e| matches!(e["verb"].as_str(), Some("create" | "update" | "patch" | "delete")))
            .filter(|e| e["objectRef"]["namespace"] == ns)
            .filter(|e| e["userAgent"].as_str().is_some_and(|a| a.contains(&format!("({by})"))))
            .collect()
    };
    let from_dead = writes(&identity);
    assert!(!from_dead.is_empty(), "the dead replica's writes are in the audit logs, under its identity");
    let late: Vec<&Value> = from_dead.iter().filter(|e| at(e) > killed_at).collect();
    assert!(late.is_empty(), "writes from the dead replica after it died: {late:?}");
    let survivor = shard(ports[alive])["replica"].as_str().unwrap().to_owned();
    assert!(writes(&survivor).iter().any(|e| at(e) > killed_at), "the survivor wrote v3");
}

/// Who owns what, as every replica's `/status` says (each of `expected` exactly once).
fn owners(ports: &[u16], expected: usize) -> Option<std::collections::BTreeMap<String, u16>> {
    let mut owners = std::collections::BTreeMap::new();
    for port in ports {
        for member in owned(*port) {
            if owners.insert(member, *port).is_some() {
                return None;
            }
        }
    }
    (owners.len() == expected).then_some(owners)
}

/// Waits until `ports` own the three members between them, each seeing `n` replicas.
async fn settled(ports: &[u16], n: usize) -> std::collections::BTreeMap<String, u16> {
    wait_for(&format!("{n} replicas to share the members"), Duration::from_secs(60), || async {
        ports.iter().all(|p| shard(*p)["replicas"].as_array().is_some_and(|r| r.len() == n))
            && owners(ports, 3).is_some()
    })
    .await;
    owners(ports, 3).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replica_added_takes_only_its_share_and_one_stopped_gives_away_only_its_own() {
    let members = crate::members::members();
    let ns = "e2e-shard-moves";
    let served = serve(&fleet_on(ns, "v1", &["member1", "member2", "member3"]));
    let new = || (free_port(), tempfile::tempdir().unwrap());
    let mut running: Vec<(u16, tempfile::TempDir, Option<Running>)> = (0..3)
        .map(|_| {
            let (port, cache) = new();
            let replica = replica(members, (served.port, "shard-moves"), port, &cache);
            (port, cache, Some(replica))
        })
        .collect();
    let ports = |running: &[(u16, tempfile::TempDir, Option<Running>)]| -> Vec<u16> {
        running.iter().filter(|r| r.2.is_some()).map(|r| r.0).collect()
    };
    let before = settled(&ports(&running), 3).await;

    // A fourth replica: members move to it and nowhere else.
    let (port, cache) = new();
    let added = replica(members, (served.port, "shard-moves"), port, &cache);
    running.push((port, cache, Some(added)));
    let after = settled(&ports(&running), 4).await;
    let moved: Vec<&String> = before.keys().filter(|m| before[*m] != after[*m]).collect();
    assert!(moved.iter().all(|m| after[*m] == port), "only to the newcomer: {before:?} → {after:?}");
    eprintln!("shard: 3 → 4 replicas: {} of {} members moved, all to the new replica", moved.len(), before.len());

    // One of the first three stops (SIGTERM: it releases its Lease): only its members
    // move, at the others' next round rather than after the lease duration.
    let stopping = *after.values().find(|p| **p != port).unwrap();
    let index = running.iter().position(|r| r.0 == stopping).unwrap();
    let pid = running[index].2.as_ref().unwrap().0.id().to_string();
    let stopped = Instant::now();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let _ = running[index].2.as_mut().unwrap().0.wait();
    running[index].2 = None;
    let last = settled(&ports(&running), 3).await;
    let took = stopped.elapsed();
    let moved: Vec<&String> = after.keys().filter(|m| after[*m] != last[*m]).collect();
    assert!(moved.iter().all(|m| after[*m] == stopping), "only the stopped replica's: {after:?} → {last:?}");
    assert!(took < Duration::from_secs(6), "a released Lease is gone at once, not after its duration: {took:?}");
    eprintln!(
        "shard: 4 → 3 replicas: {} of {} members moved (the stopped one's), after {took:?}",
        moved.len(),
        after.len()
    );
}
