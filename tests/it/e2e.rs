//! End-to-end checks of the member clusters themselves.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

use crate::members::members;
use crate::support::wait_for;

#[tokio::test(flavor = "multi_thread")]
async fn three_replicas_run_ready_in_each_of_three_isolated_members() {
    let members = members();
    assert!(members.names().len() >= 3, "need three members");
    let ns = members.namespace("e2e-deploy").await;
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}
        }
    }))
    .unwrap();
    for member in &members.names()[..3] {
        let api: Api<Deployment> = Api::namespaced(members.client(member).await, &ns.name);
        api.create(&PostParams::default(), &deployment).await.unwrap();
    }
    for member in &members.names()[..3] {
        let client = members.client(member).await;
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
        wait_for(&format!("{member}: readyReplicas 3"), Duration::from_secs(60), || async {
            let d = deployments.get("web").await.unwrap();
            d.status.and_then(|s| s.ready_replicas) == Some(3)
        })
        .await;
        let pods: Api<Pod> = Api::namespaced(client, &ns.name);
        let list = pods.list(&ListParams::default().labels("app=web")).await.unwrap();
        assert_eq!(list.items.len(), 3, "{member}: exactly its own three pods");
        for pod in &list.items {
            let status = pod.status.as_ref().unwrap();
            assert_eq!(status.phase.as_deref(), Some("Running"));
            let ready = status.conditions.iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True");
            assert!(ready, "{member}: pod {:?} not Ready", pod.metadata.name);
            assert!(pod.metadata.name.as_deref().unwrap().starts_with("web-"), "pods get generated names");
        }
    }
    // Isolation: what is created in one member does not exist in the others.
    let marker: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "only-in-member1"}})).unwrap();
    let first: Api<ConfigMap> = Api::namespaced(members.client(&members.names()[0]).await, &ns.name);
    first.create(&PostParams::default(), &marker).await.unwrap();
    for member in &members.names()[1..3] {
        let api: Api<ConfigMap> = Api::namespaced(members.client(member).await, &ns.name);
        assert!(api.get_opt("only-in-member1").await.unwrap().is_none(), "{member} sees member1's object");
    }
}

/// The Dockerfile's runtime stage, rebuilt without a container engine
/// (`hack/image-smoke.sh`): a debootstrapped bookworm root with the image's packages runs
/// the controller as deploy/ does (uid 65532, read-only root, tmpfs cache, mounted
/// kubeconfig), and it applies to a real member.
#[test]
fn the_image_runtime_root_runs_the_controller_as_deployed() {
    let out = std::process::Command::new(crate::support::root().join("hack/image-smoke.sh"))
        .env("FLOTILLA_BIN", env!("CARGO_BIN_EXE_flotilla"))
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    assert!(text.contains("ok: the image's runtime root runs the controller"), "{text}");
}
