//! `--scope` against a member's own discovery: a cluster-scoped custom kind written with
//! a namespace must not pass for a namespaced object, in the render or in the executor.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use std::time::Duration;

use crate::apply::apply;
use crate::members::members;
use crate::support::{repo, wait_for, write};

const GROUP: &str = "scope-e2e.example.com";
const NS: &str = "e2e-scope-bypass";

/// A cluster-scoped kind that reads every namespace's Secrets in the real world
/// (external-secrets' ClusterSecretStore), installed in the member by an operator: not
/// in the repository.
fn crd() -> CustomResourceDefinition {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("clustersecretstores.{GROUP}")},
        "spec": {
            "group": GROUP,
            "scope": "Cluster",
            "names": {"kind": "ClusterSecretStore", "plural": "clustersecretstores", "singular": "clustersecretstore"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    }))
    .unwrap()
}

/// The repository: the namespace the scope allows, and in it (so it seems) a store.
fn fleet() -> String {
    let mut docs = vec![format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NS}}}\n")];
    docs.push(
        "apiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {name: member1}\nspec: {syncMode: Push}\n"
            .into(),
    );
    docs.push(format!(
        "apiVersion: {GROUP}/v1\nkind: ClusterSecretStore\nmetadata: {{name: all-namespaces, namespace: {NS}}}\nspec: {{reads: every-namespace}}\n"
    ));
    docs.push(format!(
        "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: store, namespace: {NS}}}\nspec:\n  resourceSelectors: [{{apiVersion: {GROUP}/v1, kind: ClusterSecretStore}}]\n  placement: {{clusterAffinity: {{clusterNames: [member1]}}}}\n"
    ));
    docs.join("---\n")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_scoped_custom_kind_never_passes_for_a_namespaced_one() {
    let members = members();
    let client = members.client("member1").await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    if crds.get_opt(&format!("clustersecretstores.{GROUP}")).await.unwrap().is_none() {
        crds.create(&PostParams::default(), &crd()).await.unwrap();
    }
    let gvk = GroupVersionKind::gvk(GROUP, "v1", "ClusterSecretStore");
    let stores: Api<DynamicObject> = Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk));
    wait_for("the CRD to be served", Duration::from_secs(30), || async {
        stores.list(&Default::default()).await.is_ok()
    })
    .await;

    let dir = repo(&[]);
    write(dir.path(), "fleet.yaml", fleet().as_bytes());
    let scope_file = |extra: &str| {
        let file = tempfile::NamedTempFile::new().unwrap();
        let text = format!(
            "destinations: [{{name: 'member*', namespace: '{NS}'}}]\nclusterResourceWhitelist: [{{group: '', kind: Namespace}}]\n{extra}"
        );
        std::fs::write(file.path(), text).unwrap();
        file
    };

    // The render refuses a kind whose scope it cannot know.
    let plain = scope_file("");
    let (code, stdout, stderr) =
        apply(members, dir.path(), "scope-bypass", &["--scope", plain.path().to_str().unwrap()]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("ClusterSecretStore.scope-e2e.example.com is namespaced or cluster-scoped is not known"),
        "{stderr}"
    );
    assert!(stores.get_opt("all-namespaces").await.unwrap().is_none(), "never applied");

    // A scope that vouches for it as namespaced is wrong about this member: the executor
    // asks the member's discovery before writing, and refuses.
    let vouched = scope_file(&format!("namespacedResources: [{{group: {GROUP}, kind: ClusterSecretStore}}]\n"));
    let (code, stdout, stderr) =
        apply(members, dir.path(), "scope-bypass", &["--scope", vouched.path().to_str().unwrap()]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("the member serves it cluster-scoped") && stderr.contains("clusterResourceWhitelist"),
        "{stderr}"
    );
    assert!(stores.get_opt("all-namespaces").await.unwrap().is_none(), "never applied");

    // Without a scope the same repository does write it, cluster-wide: what the scope
    // stopped was real.
    let (code, stdout, stderr) = apply(members, dir.path(), "scope-bypass", &[]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stores.get_opt("all-namespaces").await.unwrap().is_some(), "written cluster-wide");
}
