//! FederatedHPA decisions (spec §5, Kubernetes' HPA algorithm as Karmada lifts it),
//! pure: pod samples, the template's replicas, the remembered [`History`] and the time
//! come in as arguments; the replica count to write comes out. The controller gathers
//! the samples from members' `metrics.k8s.io` and writes the result back to Git.

pub mod cron;
pub mod normalize;
pub mod replicas;

use std::collections::BTreeMap;

pub use normalize::{Condition, History, Stamped};
pub use replicas::{Calculated, MetricError};

use crate::model::autoscale::{FederatedHpaSpec, MetricSpec, ResourceMetric};

/// The controller's tunables, with Kubernetes' defaults (kube-controller-manager
/// `--horizontal-pod-autoscaler-*` flags, which Karmada's controller shares).
#[derive(Debug, Clone, PartialEq)]
pub struct Timing {
    /// Ratios within this distance of 1.0 change nothing.
    pub tolerance: f64,
    /// Seconds after a pod starts during which its CPU samples need care.
    pub cpu_initialization_period: i64,
    /// Seconds after start within which a pod that never became ready is still starting.
    pub initial_readiness_delay: i64,
    /// Seconds of recommendations a scale-down waits for (without `behavior`, or when
    /// `behavior.scaleDown.stabilizationWindowSeconds` is unset).
    pub downscale_window: i64,
}

impl Default for Timing {
    fn default() -> Self {
        Timing { tolerance: 0.1, cpu_initialization_period: 300, initial_readiness_delay: 30, downscale_window: 300 }
    }
}

/// Pod phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodPhase {
    /// Not yet running.
    Pending,
    /// Running.
    Running,
    /// Finished.
    Succeeded,
    /// Failed.
    Failed,
    /// Unknown.
    Unknown,
}

/// The pod's `Ready` condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ready {
    /// Whether it is `True`.
    pub status: bool,
    /// `lastTransitionTime` (unix seconds).
    pub last_transition: i64,
}

/// One PodMetrics sample.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Usage {
    /// When it was taken (unix seconds).
    pub timestamp: i64,
    /// Over how many seconds.
    pub window: i64,
    /// Container → resource → milli-units.
    pub containers: BTreeMap<String, BTreeMap<String, i64>>,
}

impl Usage {
    /// Usage of `resource` by every container, or by one.
    pub fn total(&self, resource: &str, container: Option<&str>) -> i64 {
        self.containers
            .iter()
            .filter(|(name, _)| container.is_none_or(|c| c == name.as_str()))
            .filter_map(|(_, usage)| usage.get(resource))
            .sum()
    }
}

/// One pod of a FederatedHPA's target, from any member it is placed on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    /// Unique over the pooled members (`<cluster>/<pod>`).
    pub name: String,
    /// Phase.
    pub phase: PodPhase,
    /// Being deleted.
    pub deleted: bool,
    /// The Ready condition, if reported.
    pub ready: Option<Ready>,
    /// `status.startTime` (unix seconds).
    pub start_time: Option<i64>,
    /// Container → resource → requested milli-units.
    pub requests: BTreeMap<String, BTreeMap<String, i64>>,
    /// The pod's metrics sample, if metrics.k8s.io has one.
    pub usage: Option<Usage>,
}

/// What the members report for one sync.
#[derive(Debug, Clone)]
pub struct Observed<'a> {
    /// The template's `spec.replicas` (what Git says).
    pub current: i64,
    /// Sum of `spec.replicas` of the target in the members it is placed on and that
    /// answered; below `current` when some did not.
    pub member_replicas: i64,
    /// The target's pods, pooled over those members.
    pub pods: &'a [Pod],
    /// Now (unix seconds).
    pub now: i64,
}

/// One metric's current value, as the status reports it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricValue {
    /// `Resource` or `ContainerResource`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Resource name.
    pub name: String,
    /// Container, for `ContainerResource`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// Percent of request, for utilization targets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub average_utilization: Option<i64>,
    /// Average milli-units per pod.
    pub average_milli: i64,
    /// Replicas this metric alone asks for.
    pub recommends: i64,
}

/// The outcome of one sync.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    /// The template's replicas before.
    pub current: i64,
    /// The replicas to write (equal to `current`: nothing to write).
    pub desired: i64,
    /// Why it changes: the metric that drove it, or the bound it was brought into.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Current metric values.
    pub metrics: Vec<MetricValue>,
    /// AbleToScale, ScalingActive, ScalingLimited.
    pub conditions: Vec<Condition>,
}

/// The default metric: CPU at 80 % of the request.
fn default_metrics() -> Vec<MetricSpec> {
    vec![MetricSpec {
        kind: "Resource".into(),
        resource: Some(ResourceMetric {
            name: "cpu".into(),
            container: None,
            target: crate::model::autoscale::MetricTarget {
                kind: "Utilization".into(),
                average_utilization: Some(80),
                average_value: None,
                value: None,
            },
        }),
        container_resource: None,
        pods: None,
        object: None,
        external: None,
    }]
}

/// Replicas one metric asks for.
fn compute(
    metric: &MetricSpec,
    observed: &Observed<'_>,
    calibration: f64,
    timing: &Timing,
) -> Result<(i64, MetricValue), String> {
    let source = match metric.kind.as_str() {
        "Resource" => metric.resource.as_ref(),
        "ContainerResource" => metric.container_resource.as_ref(),
        other => {
            return Err(format!("{other} metrics are not supported by flotilla (only Resource and ContainerResource)"));
        }
    }
    .ok_or_else(|| format!("a {} metric needs its source", metric.kind))?;
    let container = source.container.as_deref().filter(|_| metric.kind == "ContainerResource");
    let current = observed.current;
    let measured = replicas::Measured { pods: observed.pods, calibration, timing, now: observed.now };
    let calculated =
        match (source.target.kind.as_str(), source.target.average_utilization, &source.target.average_value) {
            ("Utilization", Some(target), _) => {
                replicas::resource_utilization(current, i64::from(target), &source.name, container, &measured)
            }
            ("AverageValue", _, Some(value)) => {
                let target = quantity(value).ok_or_else(|| format!("invalid averageValue {value}"))?;
                replicas::resource_average(current, target, &source.name, container, &measured)
            }
            (kind, ..) => return Err(format!("a {kind} target is not valid for a {} metric", metric.kind)),
        }
        .map_err(|e| e.to_string())?;
    let value = MetricValue {
        kind: metric.kind.clone(),
        name: source.name.clone(),
        container: container.map(str::to_owned),
        average_utilization: calculated.utilization,
        average_milli: calculated.average,
        recommends: calculated.replicas,
    };
    Ok((calculated.replicas, value))
}

/// A quantity (`"100m"`, `"64Mi"`, `2`) in milli-units.
pub fn quantity(value: &serde_json::Value) -> Option<i64> {
    match value {
        serde_json::Value::String(s) => crate::schedule::capacity::milli(s).and_then(|m| i64::try_from(m).ok()),
        serde_json::Value::Number(n) => n.as_f64().map(|f| (f * 1000.0) as i64),
        _ => None,
    }
}

fn describe(value: &MetricValue, metric: &MetricSpec) -> String {
    let source = metric.resource.as_ref().or(metric.container_resource.as_ref());
    let target = source.map(|s| &s.target);
    match (value.average_utilization, target.and_then(|t| t.average_utilization)) {
        (Some(now), Some(target)) => format!("{} utilization {now}% (target {target}%)", value.name),
        _ => format!("{} average {}m", value.name, value.average_milli),
    }
}

/// One sync of a FederatedHPA (Karmada's `reconcileAutoscaler`): bounds first, then the
/// largest recommendation over its metrics, stabilized and rate-limited.
pub fn decide(spec: &FederatedHpaSpec, observed: &Observed<'_>, history: &mut History, timing: &Timing) -> Decision {
    let (min, max) = (i64::from(spec.min_replicas.unwrap_or(1)), i64::from(spec.max_replicas));
    let current = observed.current;
    let mut decision =
        Decision { current, desired: current, reason: None, metrics: Vec::new(), conditions: Vec::new() };
    let inactive = |reason: &'static str, message: String| Condition::new("ScalingActive", false, reason, message);
    if current == 0 {
        decision.conditions.push(inactive(
            "ScalingDisabled",
            "scaling is disabled since the replica count of the target is zero".into(),
        ));
        return decision;
    }
    if current > max {
        decision.desired = max;
        decision.reason = Some(format!("current replicas {current} above maxReplicas {max}"));
        return decision;
    }
    if current < min {
        decision.desired = min;
        decision.reason = Some(format!("current replicas {current} below minReplicas {min}"));
        return decision;
    }
    if observed.member_replicas <= 0 {
        decision.conditions.push(inactive("FailedGetScale", "no member cluster runs the target".into()));
        return decision;
    }
    let calibration = observed.member_replicas as f64 / current as f64;
    let metrics = if spec.metrics.is_empty() { default_metrics() } else { spec.metrics.clone() };
    let Recommended { best, driver, invalid } =
        recommend(&metrics, (observed, calibration, timing), &mut decision.metrics);
    let Some(recommended) = best.filter(|b| invalid.is_empty() || *b >= current) else {
        let reason = if best.is_none() { "FailedGetResourceMetric" } else { "InvalidMetricSourceType" };
        decision.conditions.push(inactive(reason, format!("not scaling: {}", invalid.join("; "))));
        return decision;
    };
    decision.conditions.push(Condition::new(
        "ScalingActive",
        true,
        "ValidMetricFound",
        "the HPA was able to successfully calculate a replica count",
    ));
    let normalize = normalize::Normalize {
        current,
        desired: recommended,
        min,
        max,
        behavior: spec.behavior.as_ref(),
        downscale_window: timing.downscale_window,
        now: observed.now,
    };
    let (desired, conditions) = normalize.run(history);
    decision.conditions.extend(conditions);
    decision.desired = desired;
    if desired != current {
        decision.reason = driver;
    }
    decision
}

/// The largest recommendation over the metrics, what drove it, and the metrics that
/// gave none.
struct Recommended {
    best: Option<i64>,
    driver: Option<String>,
    invalid: Vec<String>,
}

/// Computes every metric's recommendation, recording each value read in `values`.
fn recommend(
    metrics: &[MetricSpec],
    (observed, calibration, timing): (&Observed<'_>, f64, &Timing),
    values: &mut Vec<MetricValue>,
) -> Recommended {
    let mut out = Recommended { best: None, driver: None, invalid: Vec::new() };
    for metric in metrics {
        match compute(metric, observed, calibration, timing) {
            Ok((replicas, value)) => {
                if out.best.is_none_or(|b| replicas > b) {
                    out.best = Some(replicas);
                    out.driver = Some(describe(&value, metric));
                }
                values.push(value);
            }
            Err(message) => out.invalid.push(message),
        }
    }
    out
}

/// Records that `decision` was written (its scale event feeds later rate limits).
pub fn written(spec: &FederatedHpaSpec, decision: &Decision, history: &mut History, timing: &Timing, now: i64) {
    normalize::record_scale(
        history,
        spec.behavior.as_ref(),
        decision.current,
        decision.desired,
        now,
        timing.downscale_window,
    );
}

#[cfg(test)]
mod properties;

#[cfg(test)]
mod tests {
    use super::*;

    /// The seed's FederatedHPA: 1–10 replicas, CPU at 10 % of a 25m request, 10 s
    /// stabilization windows both ways, default rate policies.
    fn seed() -> FederatedHpaSpec {
        serde_json::from_value(serde_json::json!({
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"},
            "minReplicas": 1, "maxReplicas": 10,
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 10}, "scaleUp": {"stabilizationWindowSeconds": 10}},
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 10}}}]
        }))
        .unwrap()
    }

    /// `n` ready pods of `app`, each requesting `request` milli-CPU and using `usage`.
    pub(super) fn app_pods(app: &str, n: i64, (request, usage): (i64, i64), now: i64) -> Vec<Pod> {
        let cpu = |milli: i64| -> BTreeMap<String, BTreeMap<String, i64>> {
            [(app.to_owned(), [("cpu".to_owned(), milli)].into())].into()
        };
        (0..n)
            .map(|i| Pod {
                name: format!("member{}/{app}-{i}", 1 + i % 2),
                phase: PodPhase::Running,
                deleted: false,
                ready: Some(Ready { status: true, last_transition: 0 }),
                start_time: Some(0),
                requests: cpu(request),
                usage: Some(Usage { timestamp: now, window: 15, containers: cpu(usage) }),
            })
            .collect()
    }

    /// The seed's nginx pods: a 25m request each.
    fn pods(n: i64, usage: i64, now: i64) -> Vec<Pod> {
        app_pods("nginx", n, (25, usage), now)
    }

    /// One sync at `now` with `n` pods each using `usage` milli-CPU; writes like the
    /// controller does.
    fn sync(spec: &FederatedHpaSpec, history: &mut History, current: i64, usage: i64, now: i64) -> Decision {
        let timing = Timing::default();
        let pods = pods(current, usage, now);
        let observed = Observed { current, member_replicas: current, pods: &pods, now };
        let decision = decide(spec, &observed, history, &timing);
        if decision.desired != decision.current {
            written(spec, &decision, history, &timing, now);
        }
        decision
    }

    #[test]
    fn the_seed_scales_1_to_5_to_10_and_back_to_1() {
        let (spec, mut history) = (seed(), History::default());
        let t = 1_000_000;
        let idle = sync(&spec, &mut history, 1, 1, t);
        assert_eq!(idle.desired, 1);
        // Load: 25m of a 25m request is 100 % against a 10 % target; the rate policies
        // (4 pods or 100 % per 15 s, the larger) allow 5 first.
        let first = sync(&spec, &mut history, 1, 25, t + 15);
        assert_eq!((first.desired, first.reason.as_deref()), (5, Some("cpu utilization 100% (target 10%)")));
        assert!(first.conditions.iter().any(|c| c.reason == "ScaleUpLimit" && c.status == "True"));
        let second = sync(&spec, &mut history, 5, 25, t + 30);
        assert_eq!(second.desired, 10);
        let capped = sync(&spec, &mut history, 10, 25, t + 45);
        assert_eq!(capped.desired, 10, "maxReplicas");
        // Idle: the first idle sync is held by the 10 s window of high recommendations
        // only if one is younger than 10 s; here the last is 15 s old, so down to min.
        let down = sync(&spec, &mut history, 10, 0, t + 60);
        assert_eq!(down.desired, 1);
        assert!(down.conditions.iter().any(|c| c.reason == "TooFewReplicas"));
    }

    #[test]
    fn a_short_spike_inside_the_window_does_not_flap() {
        let (spec, mut history) = (seed(), History::default());
        let t = 1_000_000;
        let mut current = 4;
        let mut changes = 0;
        // Load alternates every 5 s between busy (just above target) and idle; syncs
        // every 5 s see both inside any 10 s window, so nothing moves.
        sync(&spec, &mut history, current, 3, t);
        for step in 1..40 {
            let usage = if step % 2 == 0 { 3 } else { 1 };
            let d = sync(&spec, &mut history, current, usage, t + 5 * step);
            if d.desired != current {
                changes += 1;
                current = d.desired;
            }
        }
        assert!(changes <= 1, "{changes} changes");
    }

    #[test]
    fn unsupported_or_failing_metrics_never_scale() {
        let mut spec = seed();
        spec.metrics[0].kind = "External".into();
        let (mut history, now) = (History::default(), 1_000);
        let pods = pods(2, 25, now);
        let observed = Observed { current: 2, member_replicas: 2, pods: &pods, now };
        let d = decide(&spec, &observed, &mut history, &Timing::default());
        assert_eq!(d.desired, 2);
        assert!(d.conditions.iter().any(|c| c.kind == "ScalingActive" && c.status == "False"), "{d:?}");
        let observed = Observed { current: 2, member_replicas: 2, pods: &[], now };
        let d = decide(&seed(), &observed, &mut history, &Timing::default());
        assert_eq!((d.desired, d.conditions[0].reason), (2, "FailedGetResourceMetric"));
    }
}
