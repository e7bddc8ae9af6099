//! Golden explanations: one fleet of three members and a case per reason an object is,
//! or is not, where it is. Each snapshot is the text `flotilla why` prints.

use super::*;
use crate::model::{Limits, RepoFiles};

/// member1 and member2 are prod (regions r1, r2); member3 is dev, with no region.
const MEMBERS: &str = "\
apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata: {name: member1, labels: {env: prod}}
spec: {syncMode: Push, region: r1}
---
apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata: {name: member2, labels: {env: prod}}
spec: {syncMode: Push, region: r2}
---
apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata: {name: member3, labels: {env: dev}}
spec: {syncMode: Push}
";

fn nginx(replicas: i64) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: nginx, namespace: default, labels: {{app: nginx}}}}\n\
         spec:\n  replicas: {replicas}\n  selector: {{matchLabels: {{app: nginx}}}}\n  template:\n    metadata: {{labels: {{app: nginx}}}}\n\
         \x20   spec: {{containers: [{{name: nginx, image: nginx:1.27}}]}}\n"
    )
}

fn policy(name: &str, placement: &str) -> String {
    format!(
        "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: {name}, namespace: default}}\n\
         spec:\n  resourceSelectors: [{{apiVersion: apps/v1, kind: Deployment, name: nginx}}]\n  placement:\n{placement}"
    )
}

fn key() -> ObjectKey {
    ObjectKey::new("apps/v1", "Deployment", Some("default"), "nginx")
}

/// The explanation of `key` in the fleet `docs` (after the members), rendered with
/// `state` (JSON).
fn explain_in(docs: &[String], state: serde_json::Value, key: &ObjectKey) -> Explanation {
    let mut text = MEMBERS.to_owned();
    for doc in docs {
        text.push_str("---\n");
        text.push_str(doc);
    }
    let mut files = RepoFiles { revision: "r1".into(), ..Default::default() };
    files.files.insert("fleet.yaml".into(), text.into_bytes());
    let state: ClusterState = serde_json::from_value(state).unwrap();
    let plan = crate::plan(&files, &state, &Limits::default()).unwrap();
    explain(&plan, &state, key).expect("the object is declared")
}

fn why(docs: &[String], state: serde_json::Value) -> String {
    text(&explain_in(docs, state, &key()), &[])
}

fn empty() -> serde_json::Value {
    serde_json::json!({})
}

#[test]
fn placed_duplicated_everywhere() {
    let out = why(&[nginx(2), policy("all", "    replicaScheduling: {replicaSchedulingType: Duplicated}\n")], empty());
    insta::assert_snapshot!(out);
}

#[test]
fn filtered_by_cluster_names() {
    let out = why(&[nginx(1), policy("pick", "    clusterAffinity: {clusterNames: [member1]}\n")], empty());
    insta::assert_snapshot!(out);
}

#[test]
fn filtered_by_a_label_selector() {
    let placement = "    clusterAffinity: {labelSelector: {matchLabels: {env: prod}}}\n";
    insta::assert_snapshot!(why(&[nginx(1), policy("prod", placement)], empty()));
}

#[test]
fn filtered_by_a_declared_taint() {
    let tainted = MEMBERS.replace(
        "metadata: {name: member3, labels: {env: dev}}\nspec: {syncMode: Push}\n",
        "metadata: {name: member3, labels: {env: dev}}\nspec: {syncMode: Push, taints: [{key: maintenance, effect: NoSchedule}]}\n",
    );
    let docs = [nginx(1), policy("all", "    clusterAffinity: {}\n")];
    let mut text = tainted;
    for doc in &docs {
        text.push_str("---\n");
        text.push_str(doc);
    }
    let mut files = RepoFiles::default();
    files.files.insert("fleet.yaml".into(), text.into_bytes());
    let plan = crate::plan(&files, &ClusterState::default(), &Limits::default()).unwrap();
    let e = explain(&plan, &ClusterState::default(), &key()).unwrap();
    assert!(!e.members["member3"].placed);
    insta::assert_snapshot!(super::text(&e, &[]));
}

#[test]
fn a_tolerated_taint_does_not_filter() {
    let state = serde_json::json!({"taints": {"member2": [{"key": "maintenance", "effect": "NoSchedule"}]}});
    let tolerating = "    clusterTolerations: [{key: maintenance, operator: Exists, effect: NoSchedule}]\n";
    let e = explain_in(&[nginx(1), policy("all", tolerating)], state, &key());
    assert!(e.members["member2"].placed, "{:?}", e.members["member2"]);
}

#[test]
fn filtered_by_a_live_taint_from_the_cluster_state() {
    let state =
        serde_json::json!({"taints": {"member2": [{"key": "cluster.karmada.io/not-ready", "effect": "NoSchedule"}]}});
    insta::assert_snapshot!(why(&[nginx(1), policy("all", "    clusterAffinity: {}\n")], state));
}

#[test]
fn filtered_by_a_spread_constraint_on_a_missing_region() {
    let placement = "    spreadConstraints:\n      - {spreadByField: region, maxGroups: 2, minGroups: 1}\n      - {spreadByField: cluster, maxGroups: 2, minGroups: 1}\n";
    insta::assert_snapshot!(why(&[nginx(1), policy("regions", placement)], empty()));
}

#[test]
fn a_spread_constraint_selects_fewer_members() {
    let placement = "    spreadConstraints: [{spreadByField: cluster, maxGroups: 1, minGroups: 1}]\n";
    let e = explain_in(&[nginx(1), policy("one", placement)], empty(), &key());
    assert_eq!(e.members.values().filter(|m| m.placed).count(), 1);
    insta::assert_snapshot!(text(&e, &[]));
}

#[test]
fn unschedulable_when_no_member_fits() {
    let placement = "    clusterAffinity: {labelSelector: {matchLabels: {env: staging}}}\n";
    let e = explain_in(&[nginx(1), policy("staging", placement)], empty(), &key());
    assert!(e.members.values().all(|m| !m.placed));
    assert!(!e.problems.is_empty());
    insta::assert_snapshot!(text(&e, &[]));
}

#[test]
fn overridden_per_member_rule_and_field() {
    let overrides = "apiVersion: policy.karmada.io/v1alpha1\nkind: OverridePolicy\nmetadata: {name: registry, namespace: default}\n\
         spec:\n  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]\n  overrideRules:\n\
         \x20   - targetCluster: {clusterNames: [member2]}\n      overriders:\n\
         \x20       imageOverrider: [{component: Registry, operator: replace, value: registry.example.com}]\n\
         \x20   - overriders:\n        labelsOverrider: [{operator: add, value: {tier: web}}]\n";
    let docs =
        [nginx(2), policy("prod", "    clusterAffinity: {clusterNames: [member1, member2]}\n"), overrides.into()];
    insta::assert_snapshot!(why(&docs, empty()));
}

#[test]
fn an_overridden_secret_shows_its_fields_not_its_values() {
    let secret =
        "apiVersion: v1\nkind: Secret\nmetadata: {name: token, namespace: default}\nstringData: {password: hunter2}\n";
    let policy = "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: token, namespace: default}\n\
         spec:\n  resourceSelectors: [{apiVersion: v1, kind: Secret, name: token}]\n  placement: {clusterAffinity: {clusterNames: [member1]}}\n";
    let overrides = "apiVersion: policy.karmada.io/v1alpha1\nkind: OverridePolicy\nmetadata: {name: rotate, namespace: default}\n\
         spec:\n  resourceSelectors: [{apiVersion: v1, kind: Secret, name: token}]\n  overrideRules:\n\
         \x20   - overriders:\n        plaintext: [{path: /stringData/password, operator: replace, value: correct-horse}]\n";
    let e = explain_in(
        &[secret.into(), policy.into(), overrides.into()],
        empty(),
        &ObjectKey::new("v1", "Secret", Some("default"), "token"),
    );
    let out = text(&e, &[]);
    assert!(!out.contains("hunter2") && !out.contains("correct-horse"), "{out}");
    assert!(out.contains("stringData.password (a Secret's value: masked)"), "{out}");
}

#[test]
fn divided_by_static_weight_one_to_one() {
    let placement = "    clusterAffinity: {clusterNames: [member1, member2]}\n    replicaScheduling:\n      replicaSchedulingType: Divided\n\
         \x20     replicaDivisionPreference: Weighted\n      weightPreference:\n        staticWeightList:\n\
         \x20         - {targetCluster: {clusterNames: [member1]}, weight: 1}\n          - {targetCluster: {clusterNames: [member2]}, weight: 1}\n";
    let e = explain_in(&[nginx(10), policy("split", placement)], empty(), &key());
    assert_eq!((e.members["member1"].replicas, e.members["member2"].replicas), (Some(5), Some(5)));
    insta::assert_snapshot!(text(&e, &[]));
}

#[test]
fn divided_by_static_weight_with_a_zero_weight() {
    let placement = "    replicaScheduling:\n      replicaSchedulingType: Divided\n      replicaDivisionPreference: Weighted\n\
         \x20     weightPreference:\n        staticWeightList:\n          - {targetCluster: {clusterNames: [member1]}, weight: 2}\n\
         \x20         - {targetCluster: {clusterNames: [member2]}, weight: 1}\n";
    insta::assert_snapshot!(why(&[nginx(3), policy("split", placement)], empty()));
}

#[test]
fn divided_by_dynamic_weight_from_available_replicas() {
    let placement = "    clusterAffinity: {clusterNames: [member1, member2]}\n    replicaScheduling:\n      replicaSchedulingType: Divided\n\
         \x20     replicaDivisionPreference: Weighted\n      weightPreference: {dynamicWeight: AvailableReplicas}\n";
    let state =
        serde_json::json!({"clusters": {"member1": {"availableReplicas": 30}, "member2": {"availableReplicas": 10}}});
    let e = explain_in(&[nginx(8), policy("dynamic", placement)], state, &key());
    assert_eq!((e.members["member1"].replicas, e.members["member2"].replicas), (Some(6), Some(2)));
    insta::assert_snapshot!(text(&e, &[]));
}

#[test]
fn aggregated_into_the_fewest_members() {
    let placement = "    replicaScheduling: {replicaSchedulingType: Divided, replicaDivisionPreference: Aggregated}\n";
    let state = serde_json::json!({"clusters": {"member1": {"availableReplicas": 2}, "member2": {"availableReplicas": 10}, "member3": {"availableReplicas": 1}}});
    insta::assert_snapshot!(why(&[nginx(4), policy("packed", placement)], state));
}

#[test]
fn evicted_by_failover() {
    let placement = "    clusterAffinity: {clusterNames: [member1, member2]}\n    replicaScheduling:\n      replicaSchedulingType: Divided\n\
         \x20     replicaDivisionPreference: Weighted\n";
    let state = serde_json::json!({
        "evictions": {"apps/v1/Deployment/default/nginx": {"member1": {}}},
        "previous": {"apps/v1/Deployment/default/nginx": {"clusters": {"member1": 2, "member2": 2}}}
    });
    let e = explain_in(&[nginx(4), policy("split", placement)], state, &key());
    assert!(!e.members["member1"].placed);
    insta::assert_snapshot!(text(&e, &[]));
}

#[test]
fn replicas_from_the_cluster_state_replace_the_templates() {
    let placement = "    clusterAffinity: {clusterNames: [member1, member2]}\n    replicaScheduling:\n      replicaSchedulingType: Divided\n\
         \x20     replicaDivisionPreference: Weighted\n";
    let state = serde_json::json!({"replicas": {"apps/v1/Deployment/default/nginx": 10}});
    insta::assert_snapshot!(why(&[nginx(1), policy("split", placement)], state));
}

#[test]
fn unclaimed_when_no_policy_selects_it() {
    insta::assert_snapshot!(why(&[nginx(1)], empty()));
}

#[test]
fn a_namespaced_policy_goes_before_a_cluster_wide_one() {
    let cluster_wide = "apiVersion: policy.karmada.io/v1alpha1\nkind: ClusterPropagationPolicy\nmetadata: {name: everything}\n\
         spec:\n  priority: 100\n  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]\n  placement: {clusterAffinity: {clusterNames: [member3]}}\n";
    let docs = [nginx(1), policy("mine", "    clusterAffinity: {clusterNames: [member1]}\n"), cluster_wide.into()];
    insta::assert_snapshot!(why(&docs, empty()));
}

#[test]
fn the_higher_priority_wins_then_the_closer_match_then_the_name() {
    let by_label = |name: &str, priority: i32| {
        format!(
            "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: {name}, namespace: default}}\n\
             spec:\n  priority: {priority}\n  resourceSelectors: [{{apiVersion: apps/v1, kind: Deployment, labelSelector: {{matchLabels: {{app: nginx}}}}}}]\n\
             \x20 placement: {{clusterAffinity: {{clusterNames: [member2]}}}}\n"
        )
    };
    // by-name (priority 0) against a label selector of priority 5: priority first.
    let e = explain_in(
        &[nginx(1), policy("by-name", "    clusterAffinity: {clusterNames: [member1]}\n"), by_label("labelled", 5)],
        empty(),
        &key(),
    );
    assert_eq!(e.claim, "PropagationPolicy default/labelled");
    // Same priority: the name selector is the closer match; then the earlier name.
    let docs = [
        nginx(1),
        policy("by-name", "    clusterAffinity: {clusterNames: [member1]}\n"),
        by_label("labelled", 0),
        by_label("also", 0),
    ];
    insta::assert_snapshot!(why(&docs, empty()));
    let e = explain_in(&[nginx(1), by_label("b-second", 0), by_label("a-first", 0)], empty(), &key());
    assert_eq!(e.claim, "PropagationPolicy default/a-first");
    assert!(e.policies[1].why.ends_with("same priority and match, and that name sorts first"), "{:?}", e.policies);
}

#[test]
fn a_namespace_is_synced_to_every_member() {
    let ns = "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n";
    let e = explain_in(&[ns.into()], empty(), &ObjectKey::new("v1", "Namespace", None, "shop"));
    assert!(e.members.values().all(|m| m.placed));
    insta::assert_snapshot!(text(&e, &[]));
}

#[test]
fn a_configmap_is_not_a_workload() {
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: default}\ndata: {k: v}\n";
    let policy = "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: settings, namespace: default}\n\
         spec:\n  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  placement:\n    replicaScheduling: {replicaSchedulingType: Divided}\n\
         \x20   clusterAffinity: {clusterNames: [member2]}\n";
    let e = explain_in(
        &[cm.into(), policy.into()],
        empty(),
        &ObjectKey::new("v1", "ConfigMap", Some("default"), "settings"),
    );
    insta::assert_snapshot!(text(&e, &[]));
}

#[test]
fn a_dependency_follows_the_workload_that_uses_it() {
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: conf, namespace: default}\ndata: {k: v}\n";
    let deployment = nginx(1).replace(
        "containers: [{name: nginx, image: nginx:1.27}]",
        "containers: [{name: nginx, image: nginx:1.27, envFrom: [{configMapRef: {name: conf}}]}]",
    );
    let placement = "    clusterAffinity: {clusterNames: [member2]}\n";
    let policy = policy("deps", placement).replace("spec:\n", "spec:\n  propagateDeps: true\n");
    let e = explain_in(
        &[cm.into(), deployment, policy],
        empty(),
        &ObjectKey::new("v1", "ConfigMap", Some("default"), "conf"),
    );
    assert!(e.members["member2"].placed && !e.members["member1"].placed, "{e:?}");
    insta::assert_snapshot!(text(&e, &[]));
}

#[test]
fn suspended_dispatching_is_said() {
    let policy = policy("held", "    clusterAffinity: {clusterNames: [member1]}\n")
        .replace("spec:\n", "spec:\n  suspension: {dispatching: true}\n");
    insta::assert_snapshot!(why(&[nginx(1), policy], empty()));
}

#[test]
fn a_rollout_names_the_wave_each_member_is_in() {
    let rollout = "apiVersion: flotilla.dev/v1alpha1\nkind: RolloutPolicy\nmetadata: {name: waves, namespace: default}\n\
         spec:\n  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]\n  waves:\n\
         \x20   - {name: canary, clusterAffinity: {clusterNames: [member1]}}\n";
    let docs = [nginx(1), policy("all", "    clusterAffinity: {clusterNames: [member1, member2]}\n"), rollout.into()];
    let e = explain_in(&docs, empty(), &key());
    assert!(e.members["member1"].wave.as_deref().unwrap().starts_with("wave canary"), "{e:?}");
    insta::assert_snapshot!(text(&e, &[]));
}

#[test]
fn a_pull_member_is_applied_by_its_agent_and_only_asks_narrow_the_text() {
    let pull = format!(
        "{MEMBERS}---\napiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {{name: member4}}\nspec: {{syncMode: Pull}}\n"
    );
    let mut files = RepoFiles::default();
    files.files.insert(
        "fleet.yaml".into(),
        format!("{pull}---\n{}---\n{}", nginx(1), policy("all", "    clusterAffinity: {}\n")).into_bytes(),
    );
    let plan = crate::plan(&files, &ClusterState::default(), &Limits::default()).unwrap();
    let e = explain(&plan, &ClusterState::default(), &key()).unwrap();
    assert!(e.members["member4"].why.ends_with("(a Pull member: its agent applies it)"));
    let only = text(&e, &["member4".to_owned()]);
    assert!(only.contains("member4") && !only.contains("member1  "), "{only}");
    assert!(
        explain(&plan, &ClusterState::default(), &ObjectKey::new("apps/v1", "Deployment", Some("default"), "nope"))
            .is_none()
    );
}

#[test]
fn repository_text_is_made_visible_in_the_text() {
    let mut files = RepoFiles::default();
    let fleet =
        format!("{MEMBERS}---\n{}---\n{}", nginx(1), policy("all", "    clusterAffinity: {clusterNames: [member1]}\n"));
    files.files.insert("evil\u{1b}[2J\u{202e}.yaml".into(), fleet.into_bytes());
    let plan = crate::plan(&files, &ClusterState::default(), &Limits::default()).unwrap();
    let out = text(&explain(&plan, &ClusterState::default(), &key()).unwrap(), &[]);
    assert!(!out.contains('\u{1b}') && !out.contains('\u{202e}'), "{out:?}");
    assert!(out.contains("declared at evil"), "{out}");
}
