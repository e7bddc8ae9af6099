//! The autoscalers: FederatedHPA and CronFederatedHPA.

use std::collections::BTreeSet;

use super::{Check, ensure};
use crate::model::autoscale::{Behavior, CronFederatedHpaSpec, FederatedHpaSpec};

/// FederatedHPA: `1 <= minReplicas <= maxReplicas` (scale to zero is unsupported).
pub fn federated_hpa(spec: &mut FederatedHpaSpec, _: Option<&str>) -> Check {
    let min = *spec.min_replicas.get_or_insert(1);
    ensure(min >= 1, || format!("spec.minReplicas: must be at least 1, got {min}"))?;
    ensure(spec.max_replicas >= min, || {
        format!("spec.maxReplicas: {} is less than minReplicas {min}", spec.max_replicas)
    })?;
    scale_target(&spec.scale_target_ref)?;
    for (i, metric) in spec.metrics.iter().enumerate() {
        let at = format!("spec.metrics[{i}]");
        let source = match metric.kind.as_str() {
            "Resource" => metric.resource.as_ref(),
            "ContainerResource" => metric.container_resource.as_ref(),
            "Pods" | "Object" | "External" => continue,
            other => return Err(format!("{at}.type: unknown metric type {other:?}")),
        };
        let field = if metric.kind == "Resource" { "resource" } else { "containerResource" };
        let source = source.ok_or_else(|| format!("{at}.{field}: required for a {} metric", metric.kind))?;
        ensure(!source.name.is_empty(), || format!("{at}.{field}.name: required"))?;
        ensure(metric.kind == "Resource" || source.container.as_deref().is_some_and(|c| !c.is_empty()), || {
            format!("{at}.{field}.container: required")
        })?;
        let target = &source.target;
        match target.kind.as_str() {
            "Utilization" => ensure(target.average_utilization.is_some_and(|u| u > 0), || {
                format!("{at}.{field}.target.averageUtilization: a positive percentage is required")
            })?,
            "AverageValue" => ensure(
                target.average_value.as_ref().and_then(crate::autoscale::quantity).is_some_and(|v| v > 0),
                || format!("{at}.{field}.target.averageValue: a positive quantity is required"),
            )?,
            other => {
                return Err(format!(
                    "{at}.{field}.target.type: {other:?} is not valid for a resource metric (Utilization or AverageValue)"
                ));
            }
        }
    }
    spec.behavior.as_ref().map_or(Ok(()), behavior)
}

/// `spec.behavior`: the bounds of Kubernetes' HPA behavior, for scaling up and down.
fn behavior(behavior: &Behavior) -> Check {
    for (name, rules) in [("scaleUp", &behavior.scale_up), ("scaleDown", &behavior.scale_down)] {
        let Some(rules) = rules else { continue };
        let at = format!("spec.behavior.{name}");
        ensure(rules.stabilization_window_seconds.is_none_or(|w| (0..=3600).contains(&w)), || {
            format!("{at}.stabilizationWindowSeconds: must be 0 to 3600")
        })?;
        ensure(rules.select_policy.as_deref().is_none_or(|p| ["Max", "Min", "Disabled"].contains(&p)), || {
            format!("{at}.selectPolicy: must be Max, Min or Disabled")
        })?;
        for (j, policy) in rules.policies.iter().flatten().enumerate() {
            ensure(["Pods", "Percent"].contains(&policy.kind.as_str()), || {
                format!("{at}.policies[{j}].type: must be Pods or Percent")
            })?;
            ensure(policy.value > 0, || format!("{at}.policies[{j}].value: must be positive"))?;
            ensure((1..=1800).contains(&policy.period_seconds), || {
                format!("{at}.policies[{j}].periodSeconds: must be 1 to 1800")
            })?;
        }
        ensure(rules.policies.as_ref().is_none_or(|p| !p.is_empty()), || {
            format!("{at}.policies: must not be empty when set")
        })?;
    }
    Ok(())
}

fn scale_target(target: &crate::model::autoscale::ScaleTargetRef) -> Check {
    ensure(!target.api_version.is_empty() && !target.kind.is_empty() && !target.name.is_empty(), || {
        "spec.scaleTargetRef: apiVersion, kind and name are required".to_owned()
    })
}

/// CronFederatedHPA: unique rule names of 1–32 characters, five-field schedules.
pub fn cron_federated_hpa(spec: &mut CronFederatedHpaSpec, _: Option<&str>) -> Check {
    let mut names = BTreeSet::new();
    for (i, rule) in spec.rules.iter().enumerate() {
        let at = format!("spec.rules[{i}]");
        ensure(!rule.name.is_empty() && rule.name.len() <= 32, || format!("{at}.name: must be 1 to 32 characters"))?;
        ensure(names.insert(&rule.name), || format!("{at}.name: {:?} is used twice", rule.name))?;
        crate::autoscale::cron::Schedule::parse(&rule.schedule, rule.time_zone.as_deref())
            .map_err(|e| format!("{at}: {e}"))?;
        let to_fhpa = spec.scale_target_ref.kind == "FederatedHPA";
        if to_fhpa {
            ensure(rule.target_replicas.is_none(), || {
                format!("{at}.targetReplicas: not allowed for a FederatedHPA target")
            })?;
            ensure(rule.target_min_replicas.is_some() || rule.target_max_replicas.is_some(), || {
                format!("{at}: targetMinReplicas or targetMaxReplicas is required for a FederatedHPA target")
            })?;
        } else {
            ensure(rule.target_replicas.is_some_and(|r| r >= 0), || {
                format!("{at}.targetReplicas: required (at least 0) for a workload target")
            })?;
        }
        ensure(rule.target_min_replicas.is_none_or(|m| m >= 1), || format!("{at}.targetMinReplicas: at least 1"))?;
        if let (Some(min), Some(max)) = (rule.target_min_replicas, rule.target_max_replicas) {
            ensure(max >= min, || format!("{at}.targetMaxReplicas: {max} is less than targetMinReplicas {min}"))?;
        }
        ensure(rule.successful_history_limit.is_none_or(|l| (1..=32).contains(&l)), || {
            format!("{at}.successfulHistoryLimit: must be 1 to 32")
        })?;
        ensure(rule.failed_history_limit.is_none_or(|l| (0..=32).contains(&l)), || {
            format!("{at}.failedHistoryLimit: must be 0 to 32")
        })?;
    }
    scale_target(&spec.scale_target_ref)
}
