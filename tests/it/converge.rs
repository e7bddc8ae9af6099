//! Each member converges on its own: with one member's API server frozen (SIGSTOP: it
//! accepts connections and never answers, as a hung API server or a black-holed network
//! does), commits still reach the others at once, and the frozen one catches up when it
//! thaws.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

use crate::apply::fleet;
use crate::controller::{Quiet, Running, commit_and_push, free_port, http, ready, serve};
use crate::members::Dedicated;
use crate::support::{run_from_daemon, wait_for, write};

const NS: &str = "e2e-converge";

/// ConfigMaps `c0`…`c{last}`, each on every member.
fn revision(last: usize) -> String {
    let everywhere: &[&str] = &["member1", "member2", "member3"];
    let names: Vec<String> = (0..=last).map(|i| format!("c{i}")).collect();
    let placements: Vec<(&str, &[&str])> = names.iter().map(|n| (n.as_str(), everywhere)).collect();
    fleet(NS, &placements)
}

async fn has(members: &crate::members::Members, member: &str, name: &str) -> bool {
    let api: Api<ConfigMap> = Api::namespaced(members.client(member).await, NS);
    matches!(api.get_opt(name).await, Ok(Some(_)))
}

fn status(port: u16) -> serde_json::Value {
    serde_json::from_str(&http(port, "GET", "/status", &[], b"").1).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_frozen_member_never_holds_the_others_commits() {
    let dedicated = Dedicated::start(3);
    let members = &dedicated.0;
    let repo = serve(&revision(0));
    let (port, cache) = (free_port(), tempfile::tempdir().unwrap());
    let _controller = Running(
        run_from_daemon(repo.port)
            .args(["--interval", "1s", "--instance", "converge"])
            .args(["--kubeconfig", members.kubeconfig().to_str().unwrap()])
            .args(["--listen", &format!("127.0.0.1:{port}"), "--cache-dir", cache.path().to_str().unwrap()])
            .quiet(),
    );
    wait_for("readyz", Duration::from_secs(60), || async { ready(port) }).await;
    for member in ["member1", "member2", "member3"] {
        wait_for("c0 everywhere", Duration::from_secs(30), || async { has(members, member, "c0").await }).await;
    }

    // Side by side: four commits with every member up, then four with member2 frozen.
    let up = commits(members, &repo, 1..=4, &["member1", "member2", "member3"]).await;
    members.freeze("member2", true);
    let frozen = commits(members, &repo, 5..=8, &["member1", "member3"]).await;
    let seen = status(port);
    let member2 = &seen["members"]["member2"];
    assert!(["converging", "failing"].contains(&member2["state"].as_str().unwrap_or_default()), "{seen}");
    assert_eq!(seen["members"]["member1"]["state"], "current", "{seen}");
    assert!(ready(port), "the healthy members are current: ready");

    members.freeze("member2", false);
    let thawed = Instant::now();
    wait_for("member2 to catch up", Duration::from_secs(60), || async { has(members, "member2", "c8").await }).await;
    let caught_up = thawed.elapsed();
    wait_for("every member current", Duration::from_secs(30), || async {
        let seen = status(port);
        let head = seen["head"].clone();
        ["member1", "member2", "member3"].iter().all(|m| seen["members"][m]["state"] == "current")
            && seen["applied"] == head
    })
    .await;
    eprintln!("converge: commit → applied, every member up: {up:?}");
    eprintln!("converge: commit → member1 and member3, member2 frozen: {frozen:?}");
    eprintln!("converge: member2 caught up {caught_up:?} after thawing");
}

/// Commits `c{i}` for each `i` 10 s apart; each must reach `on` within 10 s. Returns
/// the time from each push until it did.
async fn commits(
    members: &crate::members::Members,
    repo: &crate::controller::Served,
    range: std::ops::RangeInclusive<usize>,
    on: &[&str],
) -> Vec<Duration> {
    let mut took = Vec::new();
    for i in range {
        write(repo.work.path(), "fleet.yaml", revision(i).as_bytes());
        commit_and_push(repo.work.path(), &format!("c{i}"));
        let pushed = Instant::now();
        let name = format!("c{i}");
        wait_for("the commit on the members", Duration::from_secs(10), || async {
            for member in on {
                if !has(members, member, &name).await {
                    return false;
                }
            }
            true
        })
        .await;
        took.push(pushed.elapsed());
        std::thread::sleep(Duration::from_secs(10).saturating_sub(pushed.elapsed()));
    }
    took
}
