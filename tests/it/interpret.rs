//! Karmada's resource interpreter on real members: a user's own kind, divided by its
//! repository customization's `GetReplicas`/`ReviseReplica`, applied to two members, and
//! reported healthy by its `InterpretHealth` once the members' status says so; the
//! field its `Retain` gives the member is kept there through the next apply; READY in
//! `status` is what its `AggregateStatus` makes of the members' statuses.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use std::time::Duration;

use crate::apply::apply;
use crate::members::members;
use crate::support::{repo, run, wait_for, write};

const GROUP: &str = "interpret-e2e.example.com";
const NS: &str = "e2e-interpret";

fn crd() -> CustomResourceDefinition {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("caches.{GROUP}")},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"kind": "Cache", "plural": "caches", "singular": "cache"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                          "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    }))
    .unwrap()
}

/// Replicas at `spec.shards`; healthy once `status.readyShards` reaches them.
fn fleet() -> String {
    let customization = format!(
        r#"apiVersion: config.karmada.io/v1alpha1
kind: ResourceInterpreterCustomization
metadata: {{name: cache}}
spec:
  target: {{apiVersion: {GROUP}/v1, kind: Cache}}
  customizations:
    replicaResource:
      luaScript: |
        function GetReplicas(obj)
          return obj.spec.shards, {{resourceRequest = {{cpu = '100m'}}}}
        end
    replicaRevision:
      luaScript: |
        function ReviseReplica(obj, desired)
          obj.spec.shards = desired
          return obj
        end
    retention:
      luaScript: |
        function Retain(desired, observed)
          if observed.spec ~= nil and observed.spec.mode ~= nil then
            desired.spec.mode = observed.spec.mode
          end
          return desired
        end
    statusAggregation:
      luaScript: |
        function AggregateStatus(desired, items)
          local ready = 0
          for i = 1, #items do
            if items[i].status ~= nil and items[i].status.readyShards ~= nil then
              ready = ready + items[i].status.readyShards
            end
          end
          desired.status = {{readyReplicas = ready, replicas = desired.spec.shards}}
          return desired
        end
    healthInterpretation:
      luaScript: |
        function InterpretHealth(observed)
          if observed.status == nil or observed.status.readyShards == nil then return false end
          return observed.status.readyShards >= observed.spec.shards
        end
"#
    );
    let cluster = |name: &str| {
        format!(
            "apiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {{name: {name}}}\nspec: {{syncMode: Push}}\n"
        )
    };
    [
        format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NS}}}\n"),
        cluster("member1"),
        cluster("member2"),
        customization,
        format!("apiVersion: {GROUP}/v1\nkind: Cache\nmetadata: {{name: hot, namespace: {NS}}}\nspec: {{shards: 9, mode: fifo}}\n"),
        format!(
            "apiVersion: policy.karmada.io/v1alpha1\nkind: ClusterPropagationPolicy\nmetadata: {{name: interpret-ns}}\nspec:\n  resourceSelectors: [{{apiVersion: v1, kind: Namespace, name: {NS}}}]\n  placement: {{clusterAffinity: {{clusterNames: [member1, member2]}}}}\n"
        ),
        format!(
            "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: hot, namespace: {NS}}}\nspec:\n  resourceSelectors: [{{apiVersion: {GROUP}/v1, kind: Cache, name: hot}}]\n  placement:\n    clusterAffinity: {{clusterNames: [member1, member2]}}\n    replicaScheduling:\n      replicaSchedulingType: Divided\n      replicaDivisionPreference: Weighted\n      weightPreference:\n        staticWeightList:\n        - {{targetCluster: {{clusterNames: [member1]}}, weight: 2}}\n        - {{targetCluster: {{clusterNames: [member2]}}, weight: 1}}\n"
        ),
    ]
    .join("---\n")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_users_own_kind_is_divided_applied_and_judged_by_its_customization() {
    let members = members();
    let gvk = GroupVersionKind::gvk(GROUP, "v1", "Cache");
    let mut caches = Vec::new();
    for member in ["member1", "member2"] {
        let client = members.client(member).await;
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        if crds.get_opt(&format!("caches.{GROUP}")).await.unwrap().is_none() {
            crds.create(&PostParams::default(), &crd()).await.unwrap();
        }
        let api: Api<DynamicObject> = Api::namespaced_with(client, NS, &ApiResource::from_gvk(&gvk));
        caches.push(api);
    }
    for api in &caches {
        wait_for("the CRD to be served", Duration::from_secs(30), || async {
            !matches!(api.list(&Default::default()).await, Err(kube::Error::Api(ref e)) if e.code == 404 && e.reason != "NotFound")
        })
        .await;
    }
    let dir = repo(&[]);
    write(dir.path(), "fleet.yaml", fleet().as_bytes());
    let (code, stdout, stderr) = apply(members, dir.path(), "interpret", &[]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    for (api, shards) in caches.iter().zip([6, 3]) {
        let live = api.get("hot").await.unwrap();
        assert_eq!(live.data["spec"]["shards"], shards, "{:?}", live.data);
        assert_eq!(live.data["spec"]["mode"], "fifo", "{:?}", live.data);
    }
    // The member's users switch member2's cache to lru; Retain makes that field theirs.
    let lru = serde_json::json!({"spec": {"mode": "lru"}});
    let manager = PatchParams { field_manager: Some("operator".into()), ..Default::default() };
    caches[1].patch("hot", &manager, &Patch::Merge(&lru)).await.unwrap();
    let (code, stdout, stderr) = apply(members, dir.path(), "interpret", &[]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("member2: 0 applied"), "the retained field is no drift:\n{stdout}");
    assert_eq!(caches[1].get("hot").await.unwrap().data["spec"]["mode"], "lru");
    assert_eq!(caches[0].get("hot").await.unwrap().data["spec"]["mode"], "fifo");

    let kubeconfig = members.kubeconfig().to_str().unwrap().to_owned();
    let status = || run(&["status", dir.path().to_str().unwrap(), "--kubeconfig", &kubeconfig]);
    let (code, table, _) = status();
    assert_ne!(code, 0, "no member reports its shards yet:\n{table}");
    assert!(table.contains("not healthy by its InterpretHealth"), "{table}");
    let row = table.lines().find(|l| l.contains(" hot ")).unwrap_or_default();
    assert!(row.contains(" 0/9 "), "READY by its AggregateStatus:\n{table}");
    for (api, shards) in caches.iter().zip([6, 3]) {
        let patch = serde_json::json!({"status": {"readyShards": shards}});
        api.patch_status("hot", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    }
    let (code, table, stderr) = status();
    assert_eq!(code, 0, "both members report every shard ready:\n{table}\n{stderr}");
    let row = table.lines().find(|l| l.contains(" hot ")).unwrap_or_default();
    assert!(row.contains("Healthy"), "{table}");
    assert!(row.contains(" 9/9 "), "READY by its AggregateStatus:\n{table}");
}
