//! Failover's objects: a policy's `spec.failover` and ClusterTaintPolicy.

use super::{Check, cluster_affinity, ensure};
use crate::model::failover::{ClusterTaintPolicySpec, FailoverBehavior, PurgeMode};

/// `spec.failover`: tolerations not negative, a grace period only where it means something.
pub(super) fn behavior(failover: &FailoverBehavior) -> Check {
    if let Some(app) = &failover.application {
        let seconds = app.decision_conditions.toleration_seconds;
        ensure(seconds.is_none_or(|s| s >= 0), || {
            "spec.failover.application.decisionConditions.tolerationSeconds: must not be negative".into()
        })?;
        ensure(app.grace_period_seconds.is_none_or(|s| s > 0), || {
            "spec.failover.application.gracePeriodSeconds: must be positive".into()
        })?;
        let gracefully = app.purge_mode.unwrap_or(PurgeMode::Gracefully) == PurgeMode::Gracefully;
        ensure(gracefully || app.grace_period_seconds.is_none(), || {
            "spec.failover.application.gracePeriodSeconds: only meaningful with purgeMode Gracefully".into()
        })?;
    }
    Ok(())
}

/// Validates a ClusterTaintPolicy as Karmada's schema and webhook do: at least one
/// taint, each NoSchedule or NoExecute with a key, no two with the same key and effect,
/// and condition tests with values. Conditions are optional (without `addOnConditions`
/// the policy adds nothing, without `removeOnConditions` it removes nothing).
pub fn cluster_taint_policy(spec: &mut ClusterTaintPolicySpec, _: Option<&str>) -> Check {
    ensure(!spec.taints.is_empty(), || "spec.taints: at least one taint is required".into())?;
    for (i, taint) in spec.taints.iter().enumerate() {
        ensure(!taint.key.is_empty(), || format!("spec.taints[{i}].key: required"))?;
        ensure(matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute"), || {
            format!("spec.taints[{i}].effect: {:?} is not NoSchedule or NoExecute", taint.effect)
        })?;
        let twin = spec.taints[i + 1..].iter().any(|t| t.key == taint.key && t.effect == taint.effect);
        ensure(!twin, || {
            format!("spec.taints[{i}]: another taint has the same key ({}) and effect ({})", taint.key, taint.effect)
        })?;
    }
    for (field, conditions) in
        [("addOnConditions", &spec.add_on_conditions), ("removeOnConditions", &spec.remove_on_conditions)]
    {
        for (i, c) in conditions.iter().enumerate() {
            ensure(!c.condition_type.is_empty(), || format!("spec.{field}[{i}].conditionType: required"))?;
            ensure(!c.status_values.is_empty(), || format!("spec.{field}[{i}].statusValues: at least one value"))?;
        }
    }
    if let Some(affinity) = &spec.target_clusters {
        cluster_affinity(affinity, "spec.targetClusters")?;
    }
    Ok(())
}
