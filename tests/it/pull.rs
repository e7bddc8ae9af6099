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
    let scope = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(scope.path(), agent_scope()).unwrap();
    let pod = InPod::new("member3", &token, "flotilla-system");
    let scope_path = scope.path().to_str().unwrap();
    let agent_args = ["--agent", "member3", "--leader-elect", "--lease-duration", "5", "--scope", scope_path];
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

/// The scope deploy/agent.yaml gives its agent.
fn agent_scope() -> String {
    let text = std::fs::read_to_string(crate::support::root().join("deploy/agent.yaml")).unwrap();
    let scope = text
        .split("\n---\n")
        .map(|doc| serde_saphyr::from_str::<serde_json::Value>(doc).unwrap())
        .find(|doc| doc["metadata"]["name"] == "flotilla-agent-scope")
        .expect("deploy/agent.yaml holds the agent's scope");
    scope["data"]["scope.yaml"].as_str().unwrap().to_owned()
}

/// deploy/agent.yaml's ClusterRole follows its scope: every kind the scope allows is
/// writable, and every resource the role grants is a kind the scope allows (checked
/// against a real member's discovery and its authorizer); RBAC objects, CRDs and
/// webhooks are not writable at all.
#[tokio::test(flavor = "multi_thread")]
async fn the_agent_role_follows_its_scope() {
    use crate::controller::{apply_rbac, can, client_as, service_account_token};

    let members = members();
    let member3 = members.client("member3").await;
    apply_rbac(&member3, "deploy/agent.yaml").await;
    let token = service_account_token(&member3, "flotilla-system", "flotilla-agent").await;
    let agent = client_as("member3", &token).await;
    let scope: serde_json::Value = serde_saphyr::from_str(&agent_scope()).unwrap();
    let allowed: Vec<(String, String, bool)> = ["clusterResourceWhitelist", "namespaceResourceWhitelist"]
        .iter()
        .flat_map(|list| {
            scope[list].as_array().unwrap().iter().map(move |gk| {
                (
                    gk["group"].as_str().unwrap().to_owned(),
                    gk["kind"].as_str().unwrap().to_owned(),
                    *list == "clusterResourceWhitelist",
                )
            })
        })
        .collect();
    let mut granted_kinds = std::collections::BTreeSet::new();
    for (group, kind, cluster_scoped) in &allowed {
        let found = kube::discovery::group(&member3, group).await.unwrap();
        let (resource, _) = found.recommended_resources().into_iter().find(|(r, _)| &r.kind == kind).unwrap();
        let namespace = (!cluster_scoped).then_some("default");
        for verb in ["get", "list", "create", "patch", "delete"] {
            assert!(can(&agent, verb, group, &resource.plural, namespace).await, "{verb} {kind}");
        }
        granted_kinds.insert((group.clone(), resource.plural.clone()));
    }
    let text = std::fs::read_to_string(crate::support::root().join("deploy/agent.yaml")).unwrap();
    let role = text
        .split("\n---\n")
        .map(|doc| serde_saphyr::from_str::<serde_json::Value>(doc).unwrap())
        .find(|doc| doc["kind"] == "ClusterRole")
        .unwrap();
    for rule in role["rules"].as_array().unwrap() {
        for group in rule["apiGroups"].as_array().unwrap() {
            for resource in rule["resources"].as_array().unwrap() {
                let pair = (group.as_str().unwrap().to_owned(), resource.as_str().unwrap().to_owned());
                assert!(granted_kinds.contains(&pair), "the role grants {pair:?}, which the scope does not allow");
            }
        }
    }
    for (group, resource) in [
        ("rbac.authorization.k8s.io", "clusterrolebindings"),
        ("rbac.authorization.k8s.io", "rolebindings"),
        ("apiextensions.k8s.io", "customresourcedefinitions"),
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
    ] {
        assert!(!can(&agent, "create", group, resource, Some("default")).await, "{resource} is not writable");
    }
}
