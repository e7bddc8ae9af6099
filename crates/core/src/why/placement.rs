//! Each member's verdict and the replica arithmetic, from the scheduler's own pieces:
//! the placer's tiers, the filter's reasons, the static weights and the capacity
//! estimates it divides by.

use std::collections::BTreeMap;

use super::{Explanation, MemberVerdict, OverrideStep};
use crate::model::cluster::{Cluster, SyncMode};
use crate::model::plan::{Rendered, Source};
use crate::model::policy::Placement;
use crate::model::{ClusterState, Plan, Template};
use crate::schedule::filter::{self, Unfit};
use crate::schedule::{self, Strategy, capacity};

/// Fills in the strategy, replicas, arithmetic and every member's verdict.
pub(super) fn members(
    plan: &Plan,
    state: &ClusterState,
    template: &Template,
    placed: &BTreeMap<&str, &Rendered>,
    source: Option<Source>,
    out: &mut Explanation,
) {
    let loaded = &plan.loaded;
    let spelled = template.key.spelled();
    let workload = template.workload();
    let replicas = workload.is_workload().then(|| state.replicas.get(&spelled).copied().unwrap_or(workload.replicas));
    out.replicas = replicas;
    let policy = match source {
        Some(Source::Policy(p)) => Some(&loaded.propagation_policies[p].spec.placement),
        _ => None,
    };
    let verdicts: Vec<Result<usize, Unfit>> = match policy {
        Some(placement) => filtered(placement, &loaded.clusters, state, template, placed),
        None => loaded.clusters.iter().map(|_| Ok(0)).collect(),
    };
    if let (Some(placement), Some(replicas)) = (policy, replicas) {
        let strategy = Strategy::of(placement);
        out.strategy = Some(strategy_name(strategy).into());
        let fit: Vec<&Cluster> =
            loaded.clusters.iter().zip(&verdicts).filter(|(_, v)| v.is_ok()).map(|(c, _)| c).collect();
        out.arithmetic = arithmetic(placement, strategy, replicas, &fit, placed, state, template);
        if let Some(from) = state.replicas.get(&spelled).filter(|r| **r != workload.replicas) {
            out.arithmetic.insert(
                0,
                format!(
                    "{} from the cluster state (an autoscaler's count), not the template's {}",
                    plural(*from, "replica"),
                    workload.replicas
                ),
            );
        }
    } else if policy.is_some() {
        out.strategy = Some("not a workload: every selected member gets the object as written".into());
    }
    for (cluster, verdict) in loaded.clusters.iter().zip(verdicts) {
        let rendered = placed.get(cluster.name.as_str()).copied();
        let why = member_why(cluster, rendered, verdict, source, policy, replicas);
        let overrides = rendered.map(|r| steps(plan, template, r)).unwrap_or_default();
        let replicas = rendered.and_then(|r| r.replicas);
        let verdict = MemberVerdict { placed: rendered.is_some(), replicas, why, overrides, wave: None };
        out.members.insert(cluster.name.clone(), verdict);
    }
}

/// Why one member does or does not get the object, in words.
fn member_why(
    cluster: &Cluster,
    rendered: Option<&Rendered>,
    verdict: Result<usize, Unfit>,
    source: Option<Source>,
    policy: Option<&Placement>,
    replicas: Option<i64>,
) -> String {
    let why = match (rendered, verdict) {
        (Some(r), _) => {
            let count = r.replicas.map(|n| format!(", {}", plural(n, "replica"))).unwrap_or_default();
            let held = if r.suspended {
                "; dispatching is suspended by its policy (nothing is applied or pruned)"
            } else {
                ""
            };
            format!("placed{count}{held}")
        }
        (None, Err(unfit)) => format!("filtered out: {}", unfit_text(&unfit)),
        (None, Ok(_)) => match source {
            None => "not placed: nothing claims the object".into(),
            Some(Source::Dependency { .. }) => "not placed: no workload that uses it is placed here".into(),
            _ => not_chosen(policy, replicas),
        },
    };
    match cluster.spec.sync_mode {
        SyncMode::Pull if rendered.is_some() => format!("{why} (a Pull member: its agent applies it)"),
        _ => why,
    }
}

/// Every cluster's verdict under the placement: its tier, or why the filter left it out.
fn filtered(
    placement: &Placement,
    clusters: &[Cluster],
    state: &ClusterState,
    template: &Template,
    placed: &BTreeMap<&str, &Rendered>,
) -> Vec<Result<usize, Unfit>> {
    let placer = schedule::Placer::new(placement, clusters);
    // The term that placed it: the first whose tiers select every member it is in.
    let terms = placement.cluster_affinities.len().max(1);
    let term = (0..terms)
        .find(|&t| {
            let tiers = placer.tiers(t).unwrap_or_default();
            !placed.is_empty()
                && clusters.iter().zip(tiers).all(|(c, tier)| !placed.contains_key(c.name.as_str()) || tier.is_some())
        })
        .unwrap_or(0);
    let tiers = placer.tiers(term).unwrap_or_default();
    let spelled = template.key.spelled();
    let workload = template.workload().is_workload();
    let previous = state.previous.get(&spelled).map(|p| p.clusters.clone()).unwrap_or_default();
    let live = filter::Live {
        taints: Some(&state.taints).filter(|_| workload),
        evicted: state.evictions.get(&spelled).filter(|_| workload),
    };
    let (tolerations, spread) = (&placement.cluster_tolerations, &placement.spread_constraints);
    clusters.iter().zip(tiers).map(|(c, tier)| filter::reason(c, *tier, tolerations, spread, &previous, live)).collect()
}

fn strategy_name(strategy: Strategy) -> &'static str {
    match strategy {
        Strategy::Duplicated => "Duplicated",
        Strategy::StaticWeight => "Divided by static weight",
        Strategy::DynamicWeight => "Divided by dynamic weight (available replicas)",
        Strategy::Aggregated => "Aggregated",
    }
}

fn unfit_text(unfit: &Unfit) -> String {
    match unfit {
        Unfit::Affinity => "the cluster affinity does not select it".into(),
        Unfit::Taint(key) => format!("it has the taint {key}, which the policy does not tolerate"),
        Unfit::MissingProperty(field) => {
            format!("it has no {}, which a spread constraint groups by", filter::field_name(*field))
        }
        Unfit::Evicted => "failover evicted the workload from it".into(),
    }
}

/// Why a member that passed the filter holds nothing.
fn not_chosen(placement: Option<&Placement>, replicas: Option<i64>) -> String {
    let Some(placement) = placement else { return "not placed".into() };
    match (Strategy::of(placement), replicas) {
        (Strategy::StaticWeight, Some(_)) => "passes the filter, but its share of the replicas is 0".into(),
        (Strategy::Duplicated, _) | (_, None) if !placement.spread_constraints.is_empty() => {
            "passes the filter, but the spread constraints did not select it".into()
        }
        (Strategy::DynamicWeight | Strategy::Aggregated, Some(_)) => {
            "passes the filter, but the division gave it no replicas".into()
        }
        _ => "passes the filter, but was not selected".into(),
    }
}

/// The division, in words and numbers.
fn arithmetic(
    placement: &Placement,
    strategy: Strategy,
    replicas: i64,
    fit: &[&Cluster],
    placed: &BTreeMap<&str, &Rendered>,
    state: &ClusterState,
    template: &Template,
) -> Vec<String> {
    let result = || {
        let parts: Vec<String> = placed.iter().map(|(c, r)| format!("{c} {}", r.replicas.unwrap_or(0))).collect();
        if parts.is_empty() { "nothing".to_owned() } else { parts.join(", ") }
    };
    match strategy {
        Strategy::Duplicated => {
            vec![format!("every selected member runs all {}: {}", plural(replicas, "replica"), result())]
        }
        Strategy::StaticWeight => {
            let weights = schedule::static_weights(placement, fit.iter().copied());
            let sum: i64 = weights.values().sum();
            let listed: Vec<String> = weights.iter().map(|(c, w)| format!("{c}:{w}")).collect();
            vec![
                format!("{} over static weights {} (sum {sum})", plural(replicas, "replica"), listed.join(" ")),
                format!(
                    "divided in proportion to the weights, one replica at a time by the Webster method (Karmada's AllocateByWeight, ties by the template's uid): {}",
                    result()
                ),
            ]
        }
        Strategy::DynamicWeight | Strategy::Aggregated => {
            let requests = &template.workload().requests;
            let available: Vec<String> = fit
                .iter()
                .map(|c| match capacity::available_replicas(state.clusters.get(&c.name), requests) {
                    Some(n) => format!("{} {n}", c.name),
                    None => format!("{} unknown (counted as {replicas})", c.name),
                })
                .collect();
            let how = if strategy == Strategy::Aggregated {
                "packed into as few members as their available replicas allow"
            } else {
                "divided in proportion to the available replicas"
            };
            vec![
                format!("available replicas: {}", available.join(", ")),
                format!("{} {how}: {}", plural(replicas, "replica"), result()),
            ]
        }
    }
}

/// The override rules applied to one member's copy, each with the fields it changes.
fn steps(plan: &Plan, template: &Template, rendered: &Rendered) -> Vec<OverrideStep> {
    let secret = template.key.api_version == "v1" && template.key.kind == "Secret";
    let Ok(steps) = plan.override_steps(rendered) else {
        // The plan's problems say why the rules failed.
        return Vec::new();
    };
    steps
        .into_iter()
        .map(|(rule, changes)| {
            let policy = &plan.loaded.override_policies[rule.policy];
            let fields = changes
                .iter()
                .map(|c| {
                    if secret {
                        return format!("{} (a Secret's value: masked)", c.path);
                    }
                    let show = |v: &Option<serde_json::Value>| v.as_ref().map_or("(none)".to_owned(), short);
                    format!("{}: {} → {}", c.path, show(&c.from), show(&c.to))
                })
                .collect();
            OverrideStep { policy: policy.describe("OverridePolicy", "ClusterOverridePolicy"), rule: rule.rule, fields }
        })
        .collect()
}

/// A value as compact JSON, cut at 80 characters.
fn short(value: &serde_json::Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= 80 { text } else { text.chars().take(79).collect::<String>() + "…" }
}

/// `1 replica`, `2 replicas`.
pub(super) fn plural(n: i64, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}
