//! The controller's Git cache when it is damaged: a ref naming history whose objects are
//! gone, as an older version left behind after a write-back was rewound away by a
//! force-push (every fetch then failed with "object not found").

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

use crate::apply::fleet;
use crate::controller::{Quiet, Running, commit_and_push, free_port, ready, serve};
use crate::members::members;
use crate::support::{run_from_daemon, wait_for, write};

/// `flotilla run` on the served repository with the cache directory `cache`.
fn controller(port: u16, cache: &Path, http_port: u16) -> Running {
    let mut command = run_from_daemon(port);
    command
        .args(["--interval", "1", "--instance", "cache", "--kubeconfig", members().kubeconfig().to_str().unwrap()])
        .args(["--listen", &format!("127.0.0.1:{http_port}"), "--cache-dir", cache.to_str().unwrap()]);
    Running(command.quiet())
}

/// Runs git in `dir` with `stdin`, returning its output.
fn git(dir: &Path, args: &[&str], stdin: &[u8]) -> String {
    use std::io::Write;
    let mut child =
        Command::new("git").args(args).current_dir(dir).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cache_missing_objects_is_started_afresh_and_the_branch_deploys() {
    let members = members();
    let ns = "e2e-cache";
    let repo = serve(&fleet(ns, &[("first", &["member1"])]));
    let cache = tempfile::tempdir().unwrap();
    let http_port = free_port();
    let running = controller(repo.port, cache.path(), http_port);
    wait_for("readyz", Duration::from_secs(60), || async { ready(http_port) }).await;
    drop(running);
    // A ref of the cache names a commit whose parent is not there.
    let dir = std::fs::read_dir(cache.path()).unwrap().map(|e| e.unwrap().path()).find(|p| p.join("objects").is_dir());
    let dir = dir.expect("the controller's cache repository");
    let tree = git(&dir, &["hash-object", "-t", "tree", "-w", "--stdin"], b"");
    let commit = format!(
        "tree {tree}\nparent {}\nauthor t <t@example.invalid> 0 +0000\ncommitter t <t@example.invalid> 0 +0000\n\nscale\n",
        "c3149027ff5ef0de73a223c9bb990c68e01afde3"
    );
    let broken = git(&dir, &["hash-object", "-t", "commit", "-w", "--stdin"], commit.as_bytes());
    git(&dir, &["update-ref", "refs/flotilla/writeback", &broken], b"");
    // Then the branch moves while the controller is down, and it starts again.
    write(repo.work.path(), "fleet.yaml", fleet(ns, &[("first", &["member1"]), ("second", &["member1"])]).as_bytes());
    commit_and_push(repo.work.path(), "second");
    let _running = controller(repo.port, cache.path(), http_port);
    let cms: Api<ConfigMap> = Api::namespaced(members.client("member1").await, ns);
    wait_for("the second ConfigMap", Duration::from_secs(60), || async {
        cms.get_opt("second").await.unwrap().is_some()
    })
    .await;
}
