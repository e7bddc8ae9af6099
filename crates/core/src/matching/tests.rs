use crate::model::Plan;

const FLEET: &str = r#"
apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata: {name: member1}
spec: {syncMode: Push}
---
apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata: {name: member2}
spec: {syncMode: Push}
---
apiVersion: v1
kind: Namespace
metadata: {name: payments}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a, labels: {namespace.karmada.io/skip-auto-propagation: "true"}}
---
apiVersion: v1
kind: Namespace
metadata: {name: kube-system}
---
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata: {name: namespaces}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Namespace}]
  placement: {clusterAffinity: {clusterNames: [member1]}}
"#;

fn plan(text: &str) -> Plan {
    crate::plan_of("r1", text)
}

fn namespaces(plan: &Plan, cluster: &str) -> Vec<String> {
    let items = plan.clusters.get(cluster).map(Vec::as_slice).unwrap_or_default();
    items
        .iter()
        .map(|r| &plan.loaded.templates[r.template].key)
        .filter(|k| k.kind == "Namespace")
        .map(|k| k.name.clone())
        .collect()
}

#[test]
fn a_namespace_the_sync_skips_goes_where_a_cluster_policy_places_it_and_system_ones_never() {
    let plan = plan(FLEET);
    // `payments` is synced everywhere; `team-a` skips the sync and takes the policy's
    // placement, as Karmada's detector matches it; `kube-system` is never claimed.
    assert_eq!(namespaces(&plan, "member1"), ["payments", "team-a"]);
    assert_eq!(namespaces(&plan, "member2"), ["payments"]);
    let unclaimed: Vec<&str> = plan.unclaimed.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(unclaimed, ["kube-system"]);
}
