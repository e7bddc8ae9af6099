//! Karmada's defaulting and validation, applied on load (spec §1.2 and
//! `pkg/util/validation`). Messages start with the field path.

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::Value;

use crate::model::cluster::ClusterSpec;
use crate::model::names::{self, NameRule};
use crate::model::policy::{
    ClusterAffinity, ClusterAffinityTerm, DivisionPreference, Operator, OverrideSpec, Placement, Preemption,
    PropagationSpec, ReplicaSchedulingType, ResourceSelector, SpreadConstraint, SpreadField,
};
use crate::model::quota::{FederatedResourceQuotaSpec, Quantity};
use crate::model::selector::LabelSelector;
use crate::model::service::MultiClusterServiceSpec;
use crate::schedule::capacity;

mod autoscale;
mod failover;
mod interpret;
mod rollout;
mod source;
pub use autoscale::{cron_federated_hpa, federated_hpa};
pub use failover::cluster_taint_policy;
pub use interpret::customization;
pub use rollout::rollout;
pub use source::{helm_chart, repository_path};

type Check = Result<(), String>;

fn ensure(condition: bool, message: impl FnOnce() -> String) -> Check {
    if condition { Ok(()) } else { Err(message()) }
}

/// Every `labelSelector` in a Karmada object, wherever it sits, is a valid
/// `metav1.LabelSelector`. Karmada's matcher treats an invalid one as matching nothing;
/// flotilla refuses it on load instead, as the API server refuses it in a Deployment, so
/// a typo such as `operator: Sometimes` cannot silently unplace a workload.
pub fn label_selectors(value: &Value) -> Check {
    fn walk(value: &Value, at: &mut String) -> Check {
        let len = at.len();
        let result = match value {
            Value::Object(map) => map.iter().try_for_each(|(key, child)| {
                at.push_str(if at.is_empty() { "" } else { "." });
                at.push_str(key);
                // A selector of the wrong shape is left to the typed parse, which names it.
                let selector = (key == "labelSelector").then(|| LabelSelector::deserialize(child).ok()).flatten();
                let checked = match selector {
                    Some(selector) => selector.check().map_err(|why| format!("{at}.{why}")),
                    None => walk(child, at),
                };
                at.truncate(len);
                checked
            }),
            Value::Array(items) => items.iter().enumerate().try_for_each(|(i, child)| {
                at.push_str(&format!("[{i}]"));
                let checked = walk(child, at);
                at.truncate(len);
                checked
            }),
            _ => Ok(()),
        };
        at.truncate(len);
        result
    }
    walk(value, &mut String::new())
}

/// A `metadata.name` by the rule the API server applies to its kind.
pub fn name(rule: NameRule, name: &str) -> Check {
    ensure(!name.is_empty(), || "must not be empty".into())?;
    ensure(rule.allows(name), || format!("{name:?} is not {}", rule.describe()))
}

/// A `metadata.namespace`: a DNS-1123 label, as Namespace names are.
pub fn namespace(namespace: &str) -> Check {
    self::name(NameRule::Dns1123Label, namespace)
}

/// `apiVersion` and `kind` by their grammar (a kind such as `../x` would otherwise reach
/// file names and URLs).
pub fn type_meta(api_version: &str, kind: &str) -> Check {
    ensure(names::is_api_version(api_version), || {
        format!("apiVersion: {api_version:?} is not VERSION or GROUP/VERSION (a DNS subdomain and a DNS-1035 label)")
    })?;
    ensure(names::is_kind(kind), || format!("kind: {kind:?} is not a kind (a letter, then letters, digits and '-')"))
}

/// Cluster names are DNS-1123 labels of at most 48 characters (`karmada-es-` must fit).
pub fn cluster_name(name: &str) -> Check {
    cluster_name_at("metadata.name", name)
}

/// [`cluster_name`] of a name written at `field`.
fn cluster_name_at(field: &str, name: &str) -> Check {
    let valid = name.len() <= 48
        && !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    ensure(valid, || format!("{field}: {name:?} must be a DNS-1123 label of at most 48 characters"))
}

/// Defaults and validates a PropagationPolicy (`namespace: Some`) or
/// ClusterPropagationPolicy spec.
pub fn propagation(spec: &mut PropagationSpec, namespace: Option<&str>) -> Check {
    resource_selectors(&mut spec.resource_selectors, namespace)?;
    if spec.preemption == Some(Preemption::Always) {
        ensure(spec.resource_selectors.iter().all(|s| s.name.is_some()), || {
            "spec.resourceSelectors: preemption Always needs a name in every selector".into()
        })?;
    }
    let imports_services = spec
        .resource_selectors
        .iter()
        .any(|s| s.api_version == "multicluster.x-k8s.io/v1alpha1" && s.kind == "ServiceImport");
    spec.propagate_deps |= spec.association || imports_services;
    if let Some(suspension) = &spec.suspension {
        ensure(suspension.dispatching.is_none() || suspension.dispatching_on_clusters.is_none(), || {
            "spec.suspension: dispatching and dispatchingOnClusters cannot both be set".into()
        })?;
    }
    if let Some(failover) = &spec.failover {
        failover::behavior(failover)?;
    }
    placement(&mut spec.placement)
}

/// At least one selector; a namespaced policy's selectors default to its namespace.
fn resource_selectors(selectors: &mut [ResourceSelector], namespace: Option<&str>) -> Check {
    ensure(!selectors.is_empty(), || "spec.resourceSelectors: at least one selector is required".into())?;
    for selector in selectors {
        if let (Some(ns), None) = (namespace, &selector.namespace) {
            selector.namespace = Some(ns.to_owned());
        }
    }
    Ok(())
}

fn placement(placement: &mut Placement) -> Check {
    ensure(placement.cluster_affinity.is_none() || placement.cluster_affinities.is_empty(), || {
        "spec.placement: clusterAffinity and clusterAffinities cannot both be set".into()
    })?;
    if let Some(affinity) = &placement.cluster_affinity {
        cluster_affinity(affinity, "spec.placement.clusterAffinity")?;
    }
    affinity_terms(&placement.cluster_affinities)?;
    overflow_allowed(placement)?;
    for (i, toleration) in placement.cluster_tolerations.iter().enumerate() {
        let at = format!("spec.placement.clusterTolerations[{i}]");
        ensure(matches!(toleration.operator.as_str(), "" | "Equal" | "Exists"), || {
            format!("{at}.operator: {:?} is not supported (Equal or Exists)", toleration.operator)
        })?;
        ensure(toleration.operator != "Exists" || toleration.value.is_empty(), || {
            format!("{at}.value: must be empty with operator Exists")
        })?;
    }
    spread_constraints(&mut placement.spread_constraints)?;
    if let Some(rs) = &mut placement.replica_scheduling {
        let kind = *rs.replica_scheduling_type.get_or_insert(ReplicaSchedulingType::Divided);
        if kind == ReplicaSchedulingType::Divided && rs.replica_division_preference.is_none() {
            rs.replica_division_preference = Some(DivisionPreference::Weighted);
        }
        if let Some(weights) = &rs.weight_preference {
            for (i, w) in weights.static_weight_list.iter().enumerate() {
                let at = format!("spec.placement.replicaScheduling.weightPreference.staticWeightList[{i}]");
                ensure(w.weight >= 1, || format!("{at}.weight: must be at least 1, got {}", w.weight))?;
                cluster_affinity(&w.target_cluster, &format!("{at}.targetCluster"))?;
            }
        }
    }
    Ok(())
}

/// `overflowAffinities` need dynamic-weight or aggregated division and a non-empty inline
/// affinity in their term.
fn overflow_allowed(placement: &Placement) -> Check {
    let dynamic = placement.replica_scheduling.as_ref().is_some_and(|rs| {
        rs.replica_scheduling_type != Some(ReplicaSchedulingType::Duplicated)
            && (rs.replica_division_preference == Some(DivisionPreference::Aggregated)
                || rs.weight_preference.as_ref().is_some_and(|w| w.dynamic_weight.is_some()))
    });
    for (i, term) in placement.cluster_affinities.iter().enumerate().filter(|(_, t)| !t.overflow_affinities.is_empty())
    {
        let at = format!("spec.placement.clusterAffinities[{i}].overflowAffinities");
        ensure(dynamic, || format!("{at}: needs dynamic-weight or Aggregated replica division"))?;
        ensure(term.affinity() != ClusterAffinity::default(), || {
            format!("{at}: needs a non-empty affinity in its term")
        })?;
    }
    Ok(())
}

fn affinity_terms(terms: &[ClusterAffinityTerm]) -> Check {
    let mut names = BTreeSet::new();
    let all = terms.iter().enumerate().flat_map(|(i, t)| {
        std::iter::once((format!("spec.placement.clusterAffinities[{i}]"), t)).chain(
            t.overflow_affinities
                .iter()
                .enumerate()
                .map(move |(j, o)| (format!("spec.placement.clusterAffinities[{i}].overflowAffinities[{j}]"), o)),
        )
    });
    for (at, term) in all {
        let name = &term.affinity_name;
        ensure(!name.is_empty() && name.len() <= 32, || format!("{at}.affinityName: must be 1 to 32 characters"))?;
        ensure(names.insert(name.clone()), || format!("{at}.affinityName: {name:?} is used twice"))?;
        cluster_affinity(&term.affinity(), &at)?;
    }
    Ok(())
}

/// Field selectors may only use `provider`, `region`, `zone` with `In`/`NotIn`.
pub fn cluster_affinity(affinity: &ClusterAffinity, at: &str) -> Check {
    let Some(fields) = &affinity.field_selector else {
        return Ok(());
    };
    for (i, r) in fields.match_expressions.iter().enumerate() {
        ensure(matches!(r.key.as_str(), "provider" | "region" | "zone"), || {
            format!("{at}.fieldSelector.matchExpressions[{i}].key: {:?} is not one of provider, region, zone", r.key)
        })?;
        ensure(matches!(r.operator.as_str(), "In" | "NotIn"), || {
            format!("{at}.fieldSelector.matchExpressions[{i}].operator: {:?} is not In or NotIn", r.operator)
        })?;
    }
    Ok(())
}

fn spread_constraints(constraints: &mut [SpreadConstraint]) -> Check {
    let mut fields = BTreeSet::new();
    for (i, c) in constraints.iter_mut().enumerate() {
        let at = format!("spec.placement.spreadConstraints[{i}]");
        ensure(c.spread_by_field.is_none() || c.spread_by_label.is_none(), || {
            format!("{at}: spreadByField and spreadByLabel cannot both be set")
        })?;
        if c.spread_by_field.is_none() && c.spread_by_label.is_none() {
            c.spread_by_field = Some(SpreadField::Cluster);
        }
        if c.min_groups == 0 {
            c.min_groups = 1;
        }
        ensure(c.min_groups >= 0 && c.max_groups >= 0, || {
            format!("{at}: minGroups and maxGroups must not be negative")
        })?;
        ensure(c.max_groups == 0 || c.max_groups >= c.min_groups, || {
            format!("{at}: maxGroups ({}) is less than minGroups ({})", c.max_groups, c.min_groups)
        })?;
        if let Some(field) = c.spread_by_field {
            ensure(fields.insert(field), || format!("{at}.spreadByField: {field:?} appears twice"))?;
        }
    }
    ensure(fields.is_empty() || fields.contains(&SpreadField::Cluster), || {
        "spec.placement.spreadConstraints: a spreadByField constraint needs a cluster constraint too".into()
    })
}

/// Validates an OverridePolicy (`namespace: Some`) or ClusterOverridePolicy spec.
pub fn overrides(spec: &mut OverrideSpec, namespace: Option<&str>) -> Check {
    for selector in &mut spec.resource_selectors {
        if let (Some(ns), None) = (namespace, &selector.namespace) {
            selector.namespace = Some(ns.to_owned());
        }
    }
    let legacy = spec.target_cluster.is_some() || spec.overriders.is_some();
    ensure(!legacy || spec.override_rules.is_empty(), || {
        "spec: overrideRules cannot be combined with targetCluster/overriders".into()
    })?;
    spec.override_rules = spec.rules();
    spec.target_cluster = None;
    spec.overriders = None;
    for (i, rule) in spec.override_rules.iter().enumerate() {
        let at = format!("spec.overrideRules[{i}]");
        if let Some(target) = &rule.target_cluster {
            cluster_affinity(target, &format!("{at}.targetCluster"))?;
        }
        let o = &rule.overriders;
        for (j, p) in o.plaintext.iter().enumerate() {
            let needs_value = p.operator != Operator::Remove;
            ensure(needs_value == p.value.is_some(), || {
                format!("{at}.overriders.plaintext[{j}].value: required for add and replace, forbidden for remove")
            })?;
            ensure(p.path.starts_with('/'), || format!("{at}.overriders.plaintext[{j}].path: must start with /"))?;
        }
        for (j, f) in o.field_overrider.iter().enumerate() {
            ensure(f.json.is_empty() != f.yaml.is_empty(), || {
                format!("{at}.overriders.fieldOverrider[{j}]: exactly one of json and yaml is required")
            })?;
        }
    }
    Ok(())
}

/// Validates a Cluster spec (`zone` and `zones` are exclusive).
pub fn cluster(spec: &mut ClusterSpec, _: Option<&str>) -> Check {
    ensure(spec.zone.is_none() || spec.zones.is_empty(), || "spec: zone and zones cannot both be set".into())?;
    for (i, taint) in spec.taints.iter().enumerate() {
        ensure(matches!(taint.effect.as_str(), "NoSchedule" | "PreferNoSchedule" | "NoExecute"), || {
            format!("spec.taints[{i}].effect: {:?} is not NoSchedule, PreferNoSchedule or NoExecute", taint.effect)
        })?;
    }
    Ok(())
}

/// Validates a MultiClusterService: at least one type, cluster names that can name a
/// cluster, ports in range.
pub fn multi_cluster_service(spec: &mut MultiClusterServiceSpec, _: Option<&str>) -> Check {
    ensure(!spec.types.is_empty(), || "spec.types: at least one of CrossCluster, LoadBalancer is required".into())?;
    for (field, names) in [("providerClusters", spec.providers()), ("consumerClusters", spec.consumers())] {
        for name in names {
            ensure(!name.is_empty(), || format!("spec.{field}: a cluster name is required"))?;
        }
    }
    let bad = spec.ports.iter().position(|p| !(1..=65535).contains(&p.port));
    bad.map_or(Ok(()), |i| Err(format!("spec.ports[{i}].port: {} is not a port", spec.ports[i].port)))
}

/// Validates a FederatedResourceQuota as Karmada's webhook does: quantities that parse
/// and are not negative, valid cluster names (each assigned once), every assigned
/// resource named in `overall`, and `overall` at least the sum of the assignments.
pub fn federated_resource_quota(spec: &mut FederatedResourceQuotaSpec, _: Option<&str>) -> Check {
    let amount = |field: &str, name: &str, q: &Quantity| -> Result<i128, String> {
        match capacity::milli(&q.text()) {
            Some(m) if m >= 0 => Ok(m),
            Some(_) => Err(format!("{field}.{name}: {:?} is negative", q.text())),
            None => Err(format!("{field}.{name}: {:?} is not a quantity", q.text())),
        }
    };
    let mut assigned: std::collections::BTreeMap<&str, i128> = Default::default();
    let mut clusters = BTreeSet::new();
    for (i, a) in spec.static_assignments.iter().enumerate() {
        let field = format!("spec.staticAssignments[{i}]");
        cluster_name_at(&format!("{field}.clusterName"), &a.cluster_name)?;
        ensure(clusters.insert(a.cluster_name.as_str()), || {
            format!("{field}.clusterName: {} is assigned twice", a.cluster_name)
        })?;
        for (name, q) in &a.hard {
            let m = amount(&format!("{field}.hard"), name, q)?;
            ensure(spec.overall.contains_key(name), || format!("{field}.hard.{name}: not in spec.overall"))?;
            *assigned.entry(name).or_default() += m;
        }
    }
    for (name, q) in &spec.overall {
        let overall = amount("spec.overall", name, q)?;
        let sum = assigned.get(name.as_str()).copied().unwrap_or(0);
        ensure(overall >= sum, || format!("spec.overall.{name}: {} is less than the assignments' sum", q.text()))?;
    }
    Ok(())
}
