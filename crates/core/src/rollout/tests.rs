use super::*;
use crate::model::rollout::{Amount, OnFailure, ReplicaOnlyChanges};
use crate::model::{Limits, RepoFiles};

const CLUSTERS: &str = r#"
apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata: {name: member1, labels: {tier: canary}}
spec: {syncMode: Push}
---
apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata: {name: member2, labels: {tier: prod}}
spec: {syncMode: Push}
---
apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata: {name: member3, labels: {tier: prod}}
spec: {syncMode: Push}
---
apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata: {name: member4, labels: {tier: prod}}
spec: {syncMode: Push}
---
apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata: {name: member5}
spec: {syncMode: Push}
"#;

const TEMPLATES: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, labels: {app: web}}
spec: {replicas: 2}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: web-config, namespace: shop, labels: {app: web}}
data: {a: "1"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: other, namespace: tools}
data: {a: "1"}
"#;

const POLICY: &str = r#"
apiVersion: flotilla.dev/v1alpha1
kind: RolloutPolicy
metadata: {name: web, namespace: shop}
spec:
  resourceSelectors:
  - {apiVersion: apps/v1, kind: Deployment, name: web}
  - {apiVersion: v1, kind: ConfigMap, labelSelector: {matchLabels: {app: web}}}
  waves:
  - {name: canary, clusterAffinity: {clusterNames: [member1]}}
  - name: prod
    clusterAffinity: {labelSelector: {matchLabels: {tier: prod}}}
    maxConcurrent: 50%
  minSuccessTime: 20s
  progressDeadline: 5m
  maxFailures: 1
  onFailure: Revert
  gates:
  - {name: errors, prometheus: {address: "http://prometheus:9090", query: "sum(rate(errors[1m]))"}, max: 1}
  windows:
  - {kind: deny, schedule: "0 22 * * *", duration: 8h, timeZone: Europe/Berlin}
"#;

fn load(docs: &[&str]) -> Result<Loaded, crate::LoadError> {
    let mut files = RepoFiles { revision: "r1".into(), ..Default::default() };
    files.files.insert("fleet.yaml".into(), docs.join("---\n").into_bytes());
    crate::load::load(&files, &Limits::default())
}

fn names(batches: &[Batch]) -> Vec<(String, usize, Vec<String>)> {
    batches.iter().map(|b| (b.wave.clone(), b.index, b.clusters.clone())).collect()
}

fn placed(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

#[test]
fn a_rollout_policy_loads_with_its_fields_and_governs_what_it_selects() {
    let loaded = load(&[CLUSTERS, TEMPLATES, POLICY]).unwrap();
    let [policy] = &loaded.rollout_policies[..] else { panic!("one policy: {:?}", loaded.rollout_policies) };
    let spec = &policy.spec;
    assert_eq!(spec.min_success_time, std::time::Duration::from_secs(20));
    assert_eq!(spec.progress_deadline, std::time::Duration::from_secs(300));
    assert_eq!((spec.max_failures, spec.on_failure), (Amount::Count(1), OnFailure::Revert));
    assert_eq!(spec.waves[1].max_concurrent, Some(Amount::Percent(50)));
    assert_eq!(spec.replica_only_changes, ReplicaOnlyChanges::Immediate);
    assert_eq!(spec.resource_selectors[0].namespace.as_deref(), Some("shop"), "defaulted to the policy's namespace");
    assert_eq!(loaded.templates.len(), 3, "the policy itself is not a template");
    assert!(loaded.not_acted_on.is_empty(), "rollouts are acted on: {:?}", loaded.not_acted_on);
    let governed = governed(&loaded);
    let by_name: Vec<(&str, Option<usize>)> =
        loaded.templates.iter().map(|t| t.key.name.as_str()).zip(governed.iter().copied()).collect();
    assert_eq!(by_name, [("web", Some(0)), ("web-config", Some(0)), ("other", None)]);
}

#[test]
fn defaults_are_ocm_s_and_kubernetes_and_a_namespaced_policy_wins_over_a_cluster_one() {
    let cluster_wide = r#"
apiVersion: flotilla.dev/v1alpha1
kind: ClusterRolloutPolicy
metadata: {name: everything}
spec:
  priority: 5
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}, {apiVersion: apps/v1, kind: Deployment}]
"#;
    let loaded = load(&[CLUSTERS, TEMPLATES, POLICY, cluster_wide]).unwrap();
    let everything = loaded.rollout_policies.iter().position(|p| p.name == "everything").unwrap();
    let spec = &loaded.rollout_policies[everything].spec;
    assert_eq!(spec.min_success_time, std::time::Duration::ZERO);
    assert_eq!(spec.progress_deadline, std::time::Duration::from_secs(600));
    assert_eq!((spec.max_failures, spec.on_failure), (Amount::Count(0), OnFailure::Pause));
    let governed = governed(&loaded);
    let web = loaded.rollout_policies.iter().position(|p| p.name == "web").unwrap();
    // The shop templates keep their namespace's policy despite the other's priority,
    // as a namespaced PropagationPolicy wins in Karmada; `tools/other` takes the
    // cluster-wide one.
    assert_eq!(governed, [Some(web), Some(web), Some(everything)]);
}

#[test]
fn waves_take_clusters_in_order_split_by_max_concurrent_and_the_rest_go_last() {
    let loaded = load(&[CLUSTERS, POLICY]).unwrap();
    let spec = &loaded.rollout_policies[0].spec;
    let all = placed(&["member1", "member2", "member3", "member4", "member5"]);
    assert_eq!(
        names(&batches(spec, &loaded.clusters, &all)),
        [
            ("canary".into(), 0, vec!["member1".into()]),
            ("prod".into(), 0, vec!["member2".into(), "member3".into()]),
            ("prod".into(), 1, vec!["member4".into()]),
            (REST.into(), 0, vec!["member5".into()]),
        ]
    );
    // Only placed clusters move; a wave that takes none is left out.
    assert_eq!(
        names(&batches(spec, &loaded.clusters, &placed(&["member3", "member5"]))),
        [("prod".into(), 0, vec!["member3".into()]), (REST.into(), 0, vec!["member5".into()])]
    );
    assert!(batches(spec, &loaded.clusters, &BTreeSet::new()).is_empty());
}

#[test]
fn a_cluster_stays_in_the_first_wave_that_takes_it() {
    let overlapping =
        POLICY.replace("clusterNames: [member1]", "labelSelector: {matchExpressions: [{key: tier, operator: Exists}]}");
    let loaded = load(&[CLUSTERS, &overlapping]).unwrap();
    let all = placed(&["member1", "member2", "member5"]);
    assert_eq!(
        names(&batches(&loaded.rollout_policies[0].spec, &loaded.clusters, &all)),
        [("canary".into(), 0, vec!["member1".into(), "member2".into()]), (REST.into(), 0, vec!["member5".into()])]
    );
}

fn unix(text: &str) -> i64 {
    text.parse::<jiff::Timestamp>().unwrap().as_second()
}

#[test]
fn windows_deny_over_allow_in_their_time_zone() {
    let loaded = load(&[POLICY]).unwrap();
    let deny = &loaded.rollout_policies[0].spec.windows;
    // 22:00 to 06:00 in Berlin (UTC+1 in December).
    assert_eq!(windows(deny, unix("2026-12-05T20:59:59Z")), Gate::Open);
    assert_eq!(windows(deny, unix("2026-12-05T21:00:00Z")), Gate::Denied { until: unix("2026-12-06T05:00:00Z") });
    assert_eq!(windows(deny, unix("2026-12-06T04:59:59Z")), Gate::Denied { until: unix("2026-12-06T05:00:00Z") });
    assert_eq!(windows(deny, unix("2026-12-06T05:00:00Z")), Gate::Open, "the end is excluded");
    let allow = Window {
        kind: WindowKind::Allow,
        schedule: "0 9 * * 1-5".into(),
        duration: std::time::Duration::from_secs(8 * 3600),
        time_zone: None,
    };
    let both = [deny[0].clone(), allow.clone()];
    // Saturday: outside every allow window; the next opens Monday 09:00 UTC.
    assert_eq!(
        windows(&both, unix("2026-12-05T12:00:00Z")),
        Gate::OutsideAllowed { next: Some(unix("2026-12-07T09:00:00Z")) }
    );
    assert_eq!(windows(&both, unix("2026-12-07T12:00:00Z")), Gate::Open);
    assert_eq!(
        windows(&[allow], unix("2026-12-07T17:00:00Z")),
        Gate::OutsideAllowed { next: Some(unix("2026-12-08T09:00:00Z")) }
    );
    assert_eq!(windows(&[], 0), Gate::Open);
}

#[test]
fn gates_pass_within_their_bounds_and_never_without_a_value() {
    let loaded = load(&[POLICY]).unwrap();
    let gate = &loaded.rollout_policies[0].spec.gates[0];
    assert!(gate.passes(Some(1.0)) && gate.passes(Some(0.0)));
    assert!(!gate.passes(Some(1.5)) && !gate.passes(None) && !gate.passes(Some(f64::NAN)));
}

#[test]
fn a_bad_rollout_policy_is_refused_with_its_file_document_line_and_field() {
    let cases = [
        ("maxConcurrent: 50%", "maxConcurrent: 150%", "neither a count nor a percentage"),
        ("maxConcurrent: 50%", "maxConcurrent: 0", "spec.waves[1].maxConcurrent: at least one cluster must move"),
        ("name: prod", "name: canary", "spec.waves[1].name: \"canary\" is used twice"),
        ("name: prod", "name: \"(rest)\"", "spec.waves[1].name: \"(rest)\" is reserved"),
        (", max: 1}", "}", "spec.gates[0]: min or max is required"),
        ("http://prometheus:9090", "prometheus:9090", "spec.gates[0].prometheus.address: must start with http://"),
        ("0 22 * * *", "0 22 * *", "spec.windows[0]: \"0 22 * *\" is not a five-field cron expression"),
        ("Europe/Berlin", "Europe/Atlantis", "unknown time zone"),
        ("minSuccessTime: 20s", "minSuccessTime: soon", "invalid duration \"soon\""),
        ("onFailure: Revert", "onFailure: Rollback", "Rollback"),
        ("  minSuccessTime: 20s", "  minSuccesTime: 20s", "minSuccesTime"),
    ];
    for (from, to, expected) in cases {
        let bad = POLICY.replace(from, to);
        assert_ne!(bad, POLICY, "{from} not found");
        let error = load(&[CLUSTERS, &bad]).unwrap_err().to_string();
        assert!(error.starts_with("fleet.yaml: document 6"), "{to}: {error}");
        assert!(error.contains("line"), "{to}: {error}");
        assert!(error.contains(expected), "{to}: expected {expected:?} in {error}");
    }
}
