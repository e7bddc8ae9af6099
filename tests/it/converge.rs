//! Each member converges on its own: with one member's API server frozen (SIGSTOP: it
//! accepts connections and never answers, as a hung API server or a black-holed network
//! does), commits still reach the others at once, and the frozen one catches up when it
//! thaws.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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
    let (_controller, port, _cache) = converged(members, &repo, members.kubeconfig(), "converge").await;

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

/// A controller following `repo` every second through `kubeconfig`, once `c0` is in
/// every member: it, its port, and its cache directory (which lives as long as it).
async fn converged(
    members: &crate::members::Members,
    repo: &crate::controller::Served,
    kubeconfig: &std::path::Path,
    instance: &str,
) -> (Running, u16, tempfile::TempDir) {
    let (port, cache) = (free_port(), tempfile::tempdir().unwrap());
    let controller = Running(
        run_from_daemon(repo.port)
            .args(["--interval", "1s", "--instance", instance, "--kubeconfig", kubeconfig.to_str().unwrap()])
            .args(["--listen", &format!("127.0.0.1:{port}"), "--cache-dir", cache.path().to_str().unwrap()])
            .quiet(),
    );
    wait_for("readyz", Duration::from_secs(60), || async { ready(port) }).await;
    for member in ["member1", "member2", "member3"] {
        wait_for("c0 everywhere", Duration::from_secs(30), || async { has(members, member, "c0").await }).await;
    }
    (controller, port, cache)
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

/// A TCP proxy to `upstream` on a free port of 127.0.0.1 that, while `slow` is set,
/// holds every chunk the server sends for `delay` before passing it on: an API server
/// that answers every request, late.
fn slow_proxy(upstream: std::net::SocketAddr, delay: Duration, slow: Arc<AtomicBool>) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let (Ok(client), Ok(server)) = (client, std::net::TcpStream::connect(upstream)) else { continue };
            let (mut client_read, mut server_write) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            std::thread::spawn(move || std::io::copy(&mut client_read, &mut server_write));
            let (mut server_read, mut client_write, slow) = (server, client, slow.clone());
            std::thread::spawn(move || {
                let mut buffer = vec![0u8; 64 * 1024];
                while let Ok(n) = server_read.read(&mut buffer) {
                    if n == 0 {
                        break;
                    }
                    if slow.load(Ordering::SeqCst) {
                        std::thread::sleep(delay);
                    }
                    if client_write.write_all(&buffer[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread")]
async fn a_member_that_answers_late_never_delays_the_others() {
    let dedicated = Dedicated::start(3);
    let members = &dedicated.0;
    let slow = Arc::new(AtomicBool::new(false));
    let proxy = slow_proxy(members.server("member2"), Duration::from_secs(20), slow.clone());
    let kubeconfig = members.kubeconfig_with("member2", proxy);
    let repo = serve(&revision(0));
    let (_controller, _port, _cache) = converged(members, &repo, kubeconfig.path(), "late").await;
    slow.store(true, Ordering::SeqCst);
    let late = commits(members, &repo, 1..=4, &["member1", "member3"]).await;
    slow.store(false, Ordering::SeqCst);
    let fast = Instant::now();
    wait_for("member2 to catch up", Duration::from_secs(90), || async { has(members, "member2", "c4").await }).await;
    eprintln!(
        "converge: member2 answering 20 s late: commit → member1 and member3 {late:?}; caught up {:?} after",
        fast.elapsed()
    );
}
