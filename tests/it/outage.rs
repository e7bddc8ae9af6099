//! The controller under failure and attack: a Git outage, slowloris clients, webhooks on
//! their own listener, an empty webhook secret. Real members, a real git server.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams};

use crate::apply::fleet;
use crate::controller::{Quiet, Running, free_port, http, ready, serve};
use crate::members::members;
use crate::support::{run_from_daemon, wait_for};

#[tokio::test(flavor = "multi_thread")]
async fn drift_is_corrected_while_git_is_down_and_hostile_http_clients_cannot_hold_the_server() {
    let members = members();
    let ns = "e2e-outage";
    let mut repo = serve(&fleet(ns, &[("kept", &["member1"])]));
    let secret_dir = tempfile::tempdir().unwrap();
    let secret_file = secret_dir.path().join("secret");
    std::fs::write(&secret_file, "s3cret\n").unwrap();
    let (port, hooks) = (free_port(), free_port());
    let cache = tempfile::tempdir().unwrap();
    let _controller = Running(
        run_from_daemon(repo.port)
            .args(["--instance", "outage"])
            // Durations as Kubernetes tools write them.
            .args(["--interval", "1s", "--resync", "2s", "--request-timeout", "5s"])
            .args(["--kubeconfig", members.kubeconfig().to_str().unwrap()])
            .args(["--listen", &format!("127.0.0.1:{port}"), "--webhook-listen", &format!("127.0.0.1:{hooks}")])
            .args(["--cache-dir", cache.path().to_str().unwrap()])
            .args(["--webhook-secret-file", secret_file.to_str().unwrap()])
            .quiet(),
    );
    wait_for("readyz", Duration::from_secs(60), || async { ready(port) }).await;
    let cms: Api<ConfigMap> = Api::namespaced(members.client("member1").await, ns);
    assert!(cms.get_opt("kept").await.unwrap().is_some());

    // Webhooks are served on their own listener only, and nothing else is there.
    let generic = |p| http(p, "POST", "/webhook/generic", &[("X-Flotilla-Signature-256", "sha256=00")], b"{}").0;
    assert_eq!(generic(port), 404, "no webhooks beside /status");
    assert_eq!(generic(hooks), 401, "webhooks on their listener (a bad signature)");
    for path in ["/status", "/metrics", "/readyz"] {
        assert_eq!(http(hooks, "GET", path, &[], b"").0, 404, "{path} is not on the webhook listener");
    }

    // The remote goes away: not ready, "source unavailable", and drift is still
    // corrected from the last good revision on every resync.
    repo.daemon.0.kill().unwrap();
    repo.daemon.0.wait().unwrap();
    wait_for("source unavailable", Duration::from_secs(20), || async {
        let status: serde_json::Value = serde_json::from_str(&http(port, "GET", "/status", &[], b"").1).unwrap();
        status["source_unavailable"].is_string() && !ready(port)
    })
    .await;
    assert!(http(port, "GET", "/metrics", &[], b"").1.lines().any(|l| l == "flotilla_source_unavailable 1"));
    cms.delete("kept", &DeleteParams::default()).await.unwrap();
    let deleted = Instant::now();
    wait_for("drift corrected during the outage", Duration::from_secs(20), || async {
        cms.get_opt("kept").await.unwrap().is_some()
    })
    .await;
    eprintln!("drift corrected {:?} after the delete, with the remote down", deleted.elapsed());

    // Slow clients: each sends part of a request head and stalls. The server closes them
    // after its header timeout, and answers others meanwhile.
    let mut slow: Vec<TcpStream> = (0..50)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").unwrap();
            s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
            s
        })
        .collect();
    let clock = Instant::now();
    assert_eq!(http(port, "GET", "/healthz", &[], b"").0, 200, "answered while slow clients hang");
    for s in &mut slow {
        let mut buf = [0u8; 256];
        // Closed by the server (0 bytes, or a 408 and then the close), not timed out here.
        let closed = s.read(&mut buf).is_ok();
        assert!(closed, "a slow client was not cut off");
    }
    let cut = clock.elapsed();
    assert!(cut < Duration::from_secs(12), "slow clients held for {cut:?}");
    eprintln!("50 slowloris connections cut after {cut:?}");

    // A client that holds 300 sockets open (half of them with a request head begun) and
    // opens another whenever one is cut, more than the server's 256 connections: every
    // probe is still answered, as the kubelet's must be.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let attacker = hold_sockets(port, 300, stop.clone());
    std::thread::sleep(Duration::from_secs(2));
    let mut answered = 0;
    for _ in 0..45 {
        answered += usize::from(probe(port) == Some(200));
        std::thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let reconnects = attacker.join().unwrap();
    eprintln!("300 held sockets ({reconnects} reconnects): {answered} of 45 probes answered");
    assert_eq!(answered, 45, "probes answered while 300 sockets are held");

    // The remote is back: ready again.
    repo.restart();
    wait_for("ready again", Duration::from_secs(20), || async { ready(port) }).await;
    let status: serde_json::Value = serde_json::from_str(&http(port, "GET", "/status", &[], b"").1).unwrap();
    assert!(status["source_unavailable"].is_null(), "{status}");
}

#[test]
fn an_empty_webhook_secret_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, " \n").unwrap();
    let (code, _, err) = crate::support::run(&[
        "run",
        "--repo",
        dir.path().to_str().unwrap(),
        "--kubeconfig",
        "/dev/null",
        "--webhook-secret-file",
        secret.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is empty"), "{err}");
}

/// Holds `n` connections to `port` open until `stop`: every other one sends half a
/// request head; one the server closes is opened again at once. Returns the reconnects.
fn hold_sockets(
    port: u16,
    n: usize,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let open = |i: usize| {
            let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
            if i.is_multiple_of(2) {
                s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").ok()?;
            }
            s.set_nonblocking(true).ok()?;
            Some(s)
        };
        let mut held: Vec<Option<TcpStream>> = (0..n).map(open).collect();
        let mut reconnects = 0;
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            for (i, slot) in held.iter_mut().enumerate() {
                let mut buf = [0u8; 512];
                let closed = match slot {
                    Some(s) => !matches!(s.read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
                    None => true,
                };
                if closed {
                    *slot = open(i);
                    reconnects += 1;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        reconnects
    })
}

/// `GET /healthz` as a kubelet probes: its status, or `None` when the connection is
/// refused, reset or not answered within 2 s.
fn probe(port: u16) -> Option<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n").ok()?;
    let mut response = Vec::new();
    let _ = s.read_to_end(&mut response);
    String::from_utf8_lossy(&response).split_whitespace().nth(1)?.parse().ok()
}
