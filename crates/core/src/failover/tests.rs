use super::*;
use crate::model::{Limits, RepoFiles};

const CLUSTERS: &str = "apiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {name: member1}\nspec: {syncMode: Push}\n---\napiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {name: member2}\nspec: {syncMode: Push}\n---\napiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {name: member3}\nspec: {syncMode: Push}\n";

/// Karmada's documented ClusterTaintPolicy: NoExecute while Ready is False or Unknown.
const TAINT_POLICY: &str = "apiVersion: policy.karmada.io/v1alpha1\nkind: ClusterTaintPolicy\nmetadata: {name: evict-unhealthy}\nspec:\n  addOnConditions: [{conditionType: Ready, operator: NotIn, statusValues: ['True']}]\n  removeOnConditions: [{conditionType: Ready, operator: In, statusValues: ['True']}]\n  taints: [{key: cluster.karmada.io/not-ready, effect: NoExecute}]\n";

fn deployment(name: &str, replicas: i64) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}, namespace: shop}}\nspec:\n  replicas: {replicas}\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec: {{containers: [{{name: c, image: nginx}}]}}\n"
    )
}

/// A policy dividing `name` 1:1:1 over the three members, with `failover` as given.
fn divided(name: &str, failover: &str) -> String {
    format!(
        "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: {name}, namespace: shop}}\nspec:\n  resourceSelectors: [{{apiVersion: apps/v1, kind: Deployment, name: {name}}}]\n  placement:\n    clusterAffinity: {{clusterNames: [member1, member2, member3]}}\n    clusterTolerations: [{{key: cluster.karmada.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 10}}]\n    replicaScheduling:\n      replicaSchedulingType: Divided\n      replicaDivisionPreference: Weighted\n      weightPreference:\n        staticWeightList:\n        - {{targetCluster: {{clusterNames: [member1]}}, weight: 1}}\n        - {{targetCluster: {{clusterNames: [member2]}}, weight: 1}}\n        - {{targetCluster: {{clusterNames: [member3]}}, weight: 1}}\n{failover}"
    )
}

const CONFIG: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: shop}\ndata: {a: b}\n---\napiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: settings, namespace: shop}\nspec:\n  resourceSelectors: [{apiVersion: v1, kind: ConfigMap, name: settings}]\n  placement: {clusterAffinity: {clusterNames: [member1, member2, member3]}}\n";

fn fleet() -> String {
    [
        CLUSTERS.to_owned(),
        TAINT_POLICY.to_owned(),
        deployment("web", 9),
        divided("web", "  failover: {cluster: {purgeMode: Gracefully}}\n"),
        deployment("batch", 9),
        divided("batch", ""),
        CONFIG.to_owned(),
    ]
    .join("---\n")
}

fn files(text: &str) -> RepoFiles {
    let mut files = RepoFiles { revision: "r1".into(), ..Default::default() };
    files.files.insert("fleet.yaml".into(), text.as_bytes().to_vec());
    files
}

fn plan_with(text: &str, state: &ClusterState) -> Plan {
    crate::plan(&files(text), state, &Limits::default()).unwrap()
}

fn replicas(plan: &Plan, name: &str) -> BTreeMap<String, i64> {
    plan.placements.iter().find(|(k, _)| k.ends_with(&format!("/{name}"))).map(|(_, p)| p.clusters.clone()).unwrap()
}

fn names_on(plan: &Plan, cluster: &str) -> Vec<String> {
    plan.clusters[cluster].iter().map(|i| plan.loaded.templates[i.template].key.name.clone()).collect()
}

#[test]
fn a_simulated_failure_moves_the_opted_in_workload_and_nothing_else() {
    let text = fleet();
    let before = plan_with(&text, &ClusterState::default());
    assert_eq!(
        replicas(&before, "web"),
        BTreeMap::from([("member1".into(), 3), ("member2".into(), 3), ("member3".into(), 3)])
    );
    let state = simulate(&before, &["member2".to_owned()]);
    assert_eq!(
        state.taints["member2"].iter().map(|t| (t.key.as_str(), t.effect.as_str())).collect::<Vec<_>>(),
        vec![(NOT_READY, "NoExecute"), (UNREACHABLE, "NoSchedule")]
    );
    let after = plan_with(&text, &state);
    let web = replicas(&after, "web");
    assert!(!web.contains_key("member2"), "{web:?}");
    assert_eq!(web.values().sum::<i64>(), 9, "the survivors take all nine: {web:?}");
    assert_eq!(replicas(&after, "batch"), replicas(&before, "batch"), "no opt-in, no move");
    assert!(names_on(&after, "member2").contains(&"settings".to_owned()), "a ConfigMap is never evicted");
    let moved = moves(&before, &after);
    assert_eq!(moved.len(), 1);
    assert!(moved[0].to_string().contains("member2 3→0"), "{}", moved[0]);
}

#[test]
fn live_taints_keep_new_replicas_away_but_move_nothing_already_there() {
    let text = fleet();
    let not_ready = Taint { key: NOT_READY.into(), value: String::new(), effect: "NoExecute".into(), time_added: None };
    let taints = BTreeMap::from([("member2".to_owned(), vec![not_ready, health_taint(Readiness::False).unwrap()])]);
    // A fresh render (nothing held before) keeps workloads off member2, not the ConfigMap.
    let fresh = plan_with(&text, &ClusterState { taints: taints.clone(), ..ClusterState::default() });
    assert!(!replicas(&fresh, "batch").contains_key("member2"));
    assert!(names_on(&fresh, "member2").contains(&"settings".to_owned()));
    // What member2 already runs stays there while it is only tainted.
    let before = plan_with(&text, &ClusterState::default());
    let held = ClusterState { taints, previous: before.placements.clone(), ..ClusterState::default() };
    let after = plan_with(&text, &held);
    assert_eq!(replicas(&after, "web"), replicas(&before, "web"));
    assert_eq!(replicas(&after, "batch"), replicas(&before, "batch"));
}

#[test]
fn a_kept_copy_stays_beside_the_new_placement_until_the_eviction_lets_it_go() {
    let text = fleet();
    let before = plan_with(&text, &ClusterState::default());
    let mut state = ClusterState { previous: before.placements.clone(), ..ClusterState::default() };
    let key = before.placements.keys().find(|k| k.ends_with("/web")).unwrap().clone();
    state.evictions.insert(key.clone(), BTreeMap::from([("member2".to_owned(), Evicted { keep: Some(3) })]));
    let graceful = replicas(&plan_with(&text, &state), "web");
    assert_eq!(graceful["member2"], 3, "the old copy is kept as it was");
    assert_eq!(graceful.iter().filter(|(c, _)| *c != "member2").map(|(_, r)| r).sum::<i64>(), 9);
    state.evictions.insert(key, BTreeMap::from([("member2".to_owned(), Evicted { keep: None })]));
    let purged = plan_with(&text, &state);
    assert!(!replicas(&purged, "web").contains_key("member2"));
    assert!(!names_on(&purged, "member2").contains(&"web".to_owned()));
}

#[test]
fn never_keeps_the_old_copy_in_a_simulation() {
    let text = fleet().replace("purgeMode: Gracefully", "purgeMode: Never");
    let before = plan_with(&text, &ClusterState::default());
    let after = plan_with(&text, &simulate(&before, &["member2".to_owned()]));
    let web = replicas(&after, "web");
    assert_eq!(web["member2"], 3);
    assert_eq!(web.values().sum::<i64>(), 12, "nine elsewhere plus the copy kept: {web:?}");
}

#[test]
fn tolerations_decide_how_long_a_no_execute_taint_is_borne() {
    let taint =
        |effect: &str| Taint { key: NOT_READY.into(), value: String::new(), effect: effect.into(), time_added: None };
    let toleration = |seconds: Option<i64>| Toleration {
        key: NOT_READY.into(),
        operator: "Exists".into(),
        effect: "NoExecute".into(),
        toleration_seconds: seconds,
        ..Toleration::default()
    };
    assert_eq!(tolerated_for(&[], &taint("NoSchedule")), None, "NoSchedule never evicts");
    assert_eq!(tolerated_for(&[], &taint("NoExecute")), Some(0));
    assert_eq!(tolerated_for(&[toleration(Some(10)), toleration(Some(30))], &taint("NoExecute")), Some(10));
    assert_eq!(tolerated_for(&[toleration(Some(10)), toleration(None)], &taint("NoExecute")), None);
    assert_eq!(tolerated_for(&[toleration(Some(-5))], &taint("NoExecute")), Some(0));
}

#[test]
fn a_taint_policy_adds_on_its_conditions_keeps_between_and_removes_on_its_own() {
    let plan = plan_with(&fleet(), &ClusterState::default());
    let member2 = &plan.loaded.clusters[1];
    let policies = &plan.loaded.cluster_taint_policies;
    let ready = |status: &str| BTreeMap::from([("Ready".to_owned(), status.to_owned())]);
    let added = policy_taints(policies, member2, &ready("False"), &[]);
    assert_eq!(added.len(), 1);
    assert_eq!(added[0].effect, "NoExecute");
    assert_eq!(policy_taints(policies, member2, &ready("Unknown"), &added), added);
    assert!(policy_taints(policies, member2, &ready("True"), &added).is_empty());
    let foreign =
        Taint { key: "team/maintenance".into(), value: String::new(), effect: "NoSchedule".into(), time_added: None };
    assert_eq!(policy_taints(policies, member2, &ready("True"), std::slice::from_ref(&foreign)), vec![foreign]);
}

#[test]
fn a_bad_taint_policy_or_failover_spec_names_its_file_and_line() {
    let bad = format!("{CLUSTERS}---\n{}", TAINT_POLICY.replace("effect: NoExecute", "effect: PreferNoSchedule"));
    let err = crate::plan(&files(&bad), &ClusterState::default(), &Limits::default()).unwrap_err().to_string();
    assert!(
        err.contains("fleet.yaml") && err.contains("document 4 (line 15)") && err.contains("spec.taints[0].effect"),
        "{err}"
    );
    let typo = fleet().replace("purgeMode: Gracefully", "purgeMod: Gracefully");
    let err = crate::plan(&files(&typo), &ClusterState::default(), &Limits::default()).unwrap_err().to_string();
    assert!(err.contains("fleet.yaml") && err.contains("purgeMod"), "{err}");
}

/// Karmada's schema requires only `taints`; its webhook refuses two taints with the
/// same key and effect (`validating_test.go`: "duplicate taints").
#[test]
fn a_taint_policy_needs_only_taints_and_no_two_alike() {
    let load = |spec: &str| {
        let text = format!(
            "apiVersion: policy.karmada.io/v1alpha1\nkind: ClusterTaintPolicy\nmetadata: {{name: t}}\nspec:\n{spec}"
        );
        crate::load::load(&files(&text), &Limits::default())
    };
    let only_taints = load("  taints: [{key: maintenance, effect: NoSchedule}]\n").unwrap();
    assert!(only_taints.cluster_taint_policies[0].spec.add_on_conditions.is_empty());
    let twice = load("  taints: [{key: a, effect: NoSchedule}, {key: a, effect: NoSchedule}]\n").unwrap_err();
    assert!(twice.to_string().contains("spec.taints[0]: another taint has the same key (a)"), "{twice}");
    load("  taints: [{key: a, effect: NoSchedule}, {key: a, effect: NoExecute}]\n").unwrap();
    assert!(load("  taints: []\n").unwrap_err().to_string().contains("at least one taint"));
}
