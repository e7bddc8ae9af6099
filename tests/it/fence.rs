//! A leader cut off from the host cluster that holds its Lease, while it still reaches
//! Git and the members: it must stop writing before a standby may take over. The leader
//! reaches the host through a TCP proxy the test cuts; the members' audit logs, where
//! every request carries its sender's identity in `User-Agent`, show what it wrote.

use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::config::Kubeconfig;

use crate::apply::fleet;
use crate::controller::{Quiet, Running, commit_and_push, free_port, http, ready, serve};
use crate::members::members;
use crate::proxy::Proxy;
use crate::support::{run_from_daemon, wait_for, write};

/// `context`'s cluster in a kubeconfig.
fn cluster<'a>(kc: &'a mut Kubeconfig, context: &str) -> &'a mut kube::config::Cluster {
    let name = kc.contexts.iter().find(|c| c.name == context).unwrap().context.as_ref().unwrap().cluster.clone();
    kc.clusters.iter_mut().find(|c| c.name == name).unwrap().cluster.as_mut().unwrap()
}

/// The `host:port` of `context`'s API server.
pub fn api_server(kubeconfig: &Path, context: &str) -> String {
    let server = cluster(&mut Kubeconfig::read_from(kubeconfig).unwrap(), context).server.clone().unwrap();
    let target = server.trim_start_matches("https://").trim_end_matches('/').to_owned();
    assert!(target.starts_with("127.0.0.1:"), "the proxy keeps the certificate's address: {server}");
    target
}

/// A copy of `kubeconfig` at `out` whose `context` reaches its cluster through `proxy`.
pub fn through(kubeconfig: &Path, context: &str, proxy: &Proxy, out: &Path) {
    let mut kc = Kubeconfig::read_from(kubeconfig).unwrap();
    cluster(&mut kc, context).server = Some(format!("https://127.0.0.1:{}", proxy.port));
    std::fs::write(out, serde_json::to_vec(&kc).unwrap()).unwrap();
}

fn status(port: u16) -> serde_json::Value {
    serde_json::from_str(&http(port, "GET", "/status", &[], b"").1).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_leader_cut_off_from_its_lease_stops_writing_before_the_standby_leads() {
    let members = members();
    let ns = "e2e-fence";
    let repo = serve(&fleet(ns, &[("one", &["member1"])]));
    let kubeconfig = members.kubeconfig().to_owned();
    let dir = tempfile::tempdir().unwrap();
    let proxied = dir.path().join("host-through-proxy.config");
    let proxy = Proxy::to(api_server(&kubeconfig, "member3"));
    through(&kubeconfig, "member3", &proxy, &proxied);
    // Renew deadline 2/3 of 4 s; retry period 0.53 s.
    let (duration, deadline) = (Duration::from_secs(4), Duration::from_millis(2667));
    let start = |host: &Path, port: u16, cache: &Path| {
        Running(
            run_from_daemon(repo.port)
                .args(["--interval", "1"])
                .args(["--instance", "fence", "--kubeconfig", kubeconfig.to_str().unwrap()])
                .args(["--listen", &format!("127.0.0.1:{port}"), "--cache-dir", cache.to_str().unwrap()])
                .args(["--leader-elect", "--host-kubeconfig", host.to_str().unwrap(), "--host-context", "member3"])
                .args(["--lease-namespace", "default", "--lease-duration", "4s"])
                .quiet(),
        )
    };
    let (port_a, port_b) = (free_port(), free_port());
    let (cache_a, cache_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = start(&proxied, port_a, cache_a.path());
    wait_for("the first controller to lead", Duration::from_secs(60), || async { ready(port_a) }).await;
    let _b = start(&kubeconfig, port_b, cache_b.path());
    wait_for("the standby's server", Duration::from_secs(30), || async {
        TcpStream::connect(("127.0.0.1", port_b)).is_ok()
    })
    .await;
    assert!(!ready(port_b), "a standby while the other leads");
    let pid = a.0.id();
    let by_a = move |e: &serde_json::Value| e["userAgent"].as_str().is_some_and(|ua| ua.ends_with(&format!("-{pid})")));
    assert!(members.writes(by_a) > 0, "the leader's writes carry its identity in User-Agent");

    // The leader loses the host cluster; Git and the members stay reachable to it.
    let (cut, cut_wall) = (Instant::now(), SystemTime::now());
    proxy.cut();
    wait_for("the cut-off leader to stand down", Duration::from_secs(10), || async {
        !ready(port_a) && status(port_a)["leading"] == false
    })
    .await;
    let stood_down = cut.elapsed();
    // A new revision while nobody may write yet; a leader without a fence applies it.
    write(repo.work.path(), "fleet.yaml", fleet(ns, &[("one", &["member1"]), ("two", &["member1"])]).as_bytes());
    commit_and_push(repo.work.path(), "two");
    wait_for("the standby to lead", Duration::from_secs(20), || async { ready(port_b) }).await;
    let took_over = cut.elapsed();
    let cms: Api<ConfigMap> = Api::namespaced(members.client("member1").await, ns);
    wait_for("the new leader to apply", Duration::from_secs(20), || async {
        cms.get_opt("two").await.unwrap().is_some()
    })
    .await;
    eprintln!("cut off: stood down after {stood_down:?}, the standby led after {took_over:?}");
    assert!(stood_down < took_over, "the old leader stood down before the standby led");
    assert!(stood_down <= deadline + Duration::from_millis(800), "stood down after {stood_down:?}");
    assert!(took_over >= duration - Duration::from_secs(1), "the standby waited for the lease: {took_over:?}");

    // Nothing from the old leader reached any member after its deadline, although it
    // fetched the branch all along.
    let fenced = cut_wall + deadline;
    let late = members.writes(|e| {
        let at: k8s_openapi::jiff::Timestamp = e["requestReceivedTimestamp"].as_str().unwrap().parse().unwrap();
        by_a(e) && SystemTime::from(at) > fenced
    });
    assert_eq!(late, 0, "writes by the cut-off leader after its renew deadline");
    let a_status = status(port_a);
    assert_eq!(a_status["leading"], false, "{a_status}");
}
