//! Pull mode: the push controller leaves `syncMode: Pull` members to their agents
//! (`flotilla run --agent NAME`), and an agent applies its own member only.

use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

use crate::apply::fleet;
use crate::controller::{
    InPod, Quiet, Running, apply_rbac, commit_and_push, free_port, http, ready, serve, service_account_token,
};
use crate::members::members;
use crate::support::{wait_for, write};

/// `flotilla run` on the served repo; returns the process and its HTTP port.
fn controller(
    mut command: Command,
    git_port: u16,
    instance: &str,
    extra: &[&str],
) -> (Running, u16, tempfile::TempDir) {
    let (port, cache) = (free_port(), tempfile::tempdir().unwrap());
    let child = command
        .args([
            "run",
            "--insecure-allow-http",
            "--repo",
            &format!("git://127.0.0.1:{git_port}/fleet.git"),
            "--interval",
            "1",
        ])
        .args(["--instance", instance, "--listen", &format!("127.0.0.1:{port}")])
        .args(["--cache-dir", cache.path().to_str().unwrap()])
        .args(extra)
        .quiet();
    (Running(child), port, cache)
}

fn flotilla() -> Command {
    Command::new(env!("CARGO_BIN_EXE_flotilla"))
}

fn status(port: u16) -> serde_json::Value {
    serde_json::from_str(&http(port, "GET", "/status", &[], b"").1).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn pull_members_are_left_to_their_agent_and_an_agent_applies_only_its_own() {
    let members = members();
    let ns = "e2e-pull";
    let pull = |text: String| {
        text.replace(
            "metadata: {name: member3}\nspec: {syncMode: Push}",
            "metadata: {name: member3}\nspec: {syncMode: Pull}",
        )
    };
    let everywhere: &[&str] = &["member1", "member2", "member3"];
    let initial = pull(fleet(ns, &[("shared", everywhere)]));
    assert!(initial.contains("syncMode: Pull"));
    let repo = serve(&initial);
    let cms = |cluster: &'static str| async move {
        Api::<ConfigMap>::namespaced(members.client(cluster).await, ns).get_opt("shared").await.unwrap().is_some()
    };

    // The push controller applies member1 and member2 and never member3.
    let kubeconfig = ["--kubeconfig", members.kubeconfig().to_str().unwrap()];
    let (_push, push_port, _c1) = controller(flotilla(), repo.port, "pull-test", &kubeconfig);
    wait_for("the push controller to apply", Duration::from_secs(60), || async { ready(push_port) }).await;
    assert!(cms("member1").await && cms("member2").await);
    let pushed = status(push_port);
    assert!(
        pushed["clusters"]["member3"].as_str().unwrap().ends_with("syncMode Pull: applied by its agent"),
        "{pushed}"
    );
    assert!(!cms("member3").await, "a Pull member is not contacted by the push controller");

    // member3's agent runs inside member3, as deploy/agent.yaml's ServiceAccount through
    // in-cluster configuration (no kubeconfig), and applies member3 only: a second
    // ConfigMap placed on member3 alone shows up there, while the push controller has
    // nothing to do.
    let member3 = members.client("member3").await;
    apply_rbac(&member3, "deploy/agent.yaml").await;
    let token = service_account_token(&member3, "flotilla-system", "flotilla-agent").await;
    let pod = InPod::new("member3", &token, "flotilla-system");
    let agent_args = ["--agent", "member3", "--leader-elect", "--lease-duration", "5"];
    let (_agent, agent_port, _c2) =
        controller(pod.command(env!("CARGO_BIN_EXE_flotilla")), repo.port, "pull-test", &agent_args);
    wait_for("the agent to apply member3", Duration::from_secs(60), || async { ready(agent_port) }).await;
    assert!(cms("member3").await);
    let agent = status(agent_port);
    assert_eq!(agent["clusters"].as_object().unwrap().keys().collect::<Vec<_>>(), ["member3"], "{agent}");
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> = Api::namespaced(member3.clone(), "flotilla-system");
    let lease = leases.get("flotilla-pull-test-agent-member3").await.unwrap();
    assert!(lease.spec.unwrap().holder_identity.is_some(), "the agent leads on its own Lease in its member");

    write(
        repo.work.path(),
        "fleet.yaml",
        pull(fleet(ns, &[("shared", everywhere), ("only3", &["member3"])])).as_bytes(),
    );
    commit_and_push(repo.work.path(), "only3");
    let only3 = |cluster: &'static str| async move {
        Api::<ConfigMap>::namespaced(members.client(cluster).await, ns).get_opt("only3").await.unwrap().is_some()
    };
    wait_for("only3 in member3", Duration::from_secs(30), || async { only3("member3").await }).await;
    assert!(!only3("member1").await && !only3("member2").await);

    // An agent for a member declared Push refuses: two writers would fight.
    let wrong = [&kubeconfig[..], &["--agent", "member2"]].concat();
    let (_wrong, wrong_port, _c3) = controller(flotilla(), repo.port, "pull-test-wrong", &wrong);
    wait_for("its server", Duration::from_secs(30), || async {
        std::net::TcpStream::connect(("127.0.0.1", wrong_port)).is_ok()
    })
    .await;
    wait_for("the refusal", Duration::from_secs(30), || async {
        http(wrong_port, "GET", "/status", &[], b"").1.contains("declared with syncMode Push")
    })
    .await;
    assert!(!ready(wrong_port), "an agent that applies nothing is not ready");
    let metrics = http(wrong_port, "GET", "/metrics", &[], b"").1;
    assert!(metrics.contains(r#"flotilla_errors_total{cluster="member2",reason="sync-mode"}"#), "{metrics}");
}
