//! The replica calculator: from pod samples and a metric target to a replica count
//! (Kubernetes' `ReplicaCalculator` as Karmada lifts it, spec §5.2 step 5). Counts are
//! `i64`; quantities are milli-units (1 CPU = 1000, 1 byte of memory = 1000).

use std::collections::{BTreeMap, BTreeSet};

use super::{Pod, PodPhase, Timing};

/// The pods measured, and how to read them.
#[derive(Debug, Clone, Copy)]
pub struct Measured<'a> {
    /// The target's pods in every member it is placed on.
    pub pods: &'a [Pod],
    /// Member replicas over template replicas (below 1 when a member did not answer).
    pub calibration: f64,
    /// Tolerance and readiness periods.
    pub timing: &'a Timing,
    /// Now (unix seconds).
    pub now: i64,
}

/// What the calculator decided for one metric.
#[derive(Debug, Clone, PartialEq)]
pub struct Calculated {
    /// Replicas this metric asks for.
    pub replicas: i64,
    /// For utilization targets: percent of the request (floored), over ready pods.
    pub utilization: Option<i64>,
    /// Average usage per pod in milli-units.
    pub average: i64,
}

/// Why a metric could not be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetricError {
    /// No ready pod reported a sample.
    #[error("no metrics for the targeted pods (they may be unready or not yet measured)")]
    NoMetrics,
    /// A container has no request for the resource, so utilization is undefined.
    #[error("missing request for {resource} in container {container} of pod {pod}")]
    MissingRequest {
        /// Resource.
        resource: String,
        /// Container.
        container: String,
        /// Pod.
        pod: String,
    },
    /// Requests add up to zero.
    #[error("the requests of the measured pods add up to zero")]
    NoRequests,
}

/// Pods sorted into Kubernetes' groups for one resource.
struct Groups {
    ready: i64,
    unready: BTreeSet<String>,
    missing: BTreeSet<String>,
    /// Samples by pod, of every pod that is not ignored (unready ones included).
    metrics: BTreeMap<String, i64>,
}

/// Kubernetes' `groupPods`: deleted and failed pods are ignored (left out of every
/// group, samples included), pending ones unready,
/// pods without a sample missing; for CPU, pods still starting up (no Ready condition,
/// inside the initialization period with a sample older than readiness, or never ready
/// within the readiness delay) are unready.
fn group(pods: &[Pod], resource: &str, container: Option<&str>, timing: &Timing, now: i64) -> Groups {
    let mut g = Groups { ready: 0, unready: BTreeSet::new(), missing: BTreeSet::new(), metrics: BTreeMap::new() };
    for pod in pods {
        if pod.deleted || pod.phase == PodPhase::Failed {
            continue;
        }
        if pod.phase == PodPhase::Pending {
            g.unready.insert(pod.name.clone());
            if let Some(sample) = &pod.usage {
                g.metrics.insert(pod.name.clone(), sample.total(resource, container));
            }
            continue;
        }
        let Some(sample) = &pod.usage else {
            g.missing.insert(pod.name.clone());
            continue;
        };
        let value = sample.total(resource, container);
        if resource == "cpu" {
            let unready = match (&pod.ready, pod.start_time) {
                (Some(ready), Some(start)) => {
                    if start + timing.cpu_initialization_period > now {
                        !ready.status || sample.timestamp < ready.last_transition + sample.window
                    } else {
                        !ready.status && start + timing.initial_readiness_delay > ready.last_transition
                    }
                }
                _ => true,
            };
            if unready {
                g.unready.insert(pod.name.clone());
                g.metrics.insert(pod.name.clone(), value);
                continue;
            }
        }
        g.metrics.insert(pod.name.clone(), value);
        g.ready += 1;
    }
    g
}

/// Requests per pod for the resource (all containers, or one), Kubernetes'
/// `calculatePodRequests`.
fn requests(pods: &[Pod], resource: &str, container: Option<&str>) -> Result<BTreeMap<String, i64>, MetricError> {
    let mut out = BTreeMap::new();
    for pod in pods {
        let mut total = 0;
        for (name, requests) in &pod.requests {
            if container.is_some_and(|c| c != name) {
                continue;
            }
            match requests.get(resource) {
                Some(r) => total += r,
                None => {
                    return Err(MetricError::MissingRequest {
                        resource: resource.into(),
                        container: name.clone(),
                        pod: pod.name.clone(),
                    });
                }
            }
        }
        out.insert(pod.name.clone(), total);
    }
    Ok(out)
}

/// `GetResourceUtilizationRatio`: (ratio, utilization %, average usage).
fn utilization_ratio(
    metrics: &BTreeMap<String, i64>,
    requests: &BTreeMap<String, i64>,
    target: i64,
) -> Result<(f64, i64, i64), MetricError> {
    let (mut usage, mut requested, mut entities) = (0i64, 0i64, 0i64);
    for (pod, value) in metrics {
        // A sample of a pod without a known request is extraneous.
        let Some(request) = requests.get(pod) else { continue };
        usage += value;
        requested += request;
        entities += 1;
    }
    if requested == 0 {
        return Err(MetricError::NoRequests);
    }
    let utilization = usage * 100 / requested;
    Ok((utilization as f64 / target as f64, utilization, usage / entities))
}

/// Replicas for a resource metric with a `Utilization` target (Kubernetes'
/// `GetResourceReplicas`). `calibration` is the share of the template's replicas that
/// the placed members run (1.0 when all are reachable).
pub fn resource_utilization(
    current: i64,
    target: i64,
    resource: &str,
    container: Option<&str>,
    measured: &Measured<'_>,
) -> Result<Calculated, MetricError> {
    let Measured { pods, calibration, timing, now } = *measured;
    let mut g = group(pods, resource, container, timing, now);
    for pod in &g.unready {
        g.metrics.remove(pod);
    }
    if g.metrics.is_empty() {
        return Err(MetricError::NoMetrics);
    }
    let requests = requests(pods, resource, container)?;
    let (ratio, utilization, average) = utilization_ratio(&g.metrics, &requests, target)?;
    let done = |replicas| Ok(Calculated { replicas, utilization: Some(utilization), average });
    let scale_up_with_unready = !g.unready.is_empty() && ratio > 1.0;
    if !scale_up_with_unready && g.missing.is_empty() {
        if (1.0 - ratio).abs() <= timing.tolerance {
            return done(current);
        }
        return done((ratio * g.ready as f64 / calibration).ceil() as i64);
    }
    // Scaling down, a missing pod counts as using its whole request (or the target,
    // above 100 %); scaling up, as using nothing.
    let fallback = target.max(100);
    for pod in &g.missing {
        if ratio < 1.0 {
            g.metrics.insert(pod.clone(), requests.get(pod).copied().unwrap_or(0) * fallback / 100);
        } else if ratio > 1.0 {
            g.metrics.insert(pod.clone(), 0);
        }
    }
    if scale_up_with_unready {
        for pod in &g.unready {
            g.metrics.insert(pod.clone(), 0);
        }
    }
    let (new_ratio, _, _) = utilization_ratio(&g.metrics, &requests, target)?;
    settle(current, ratio, new_ratio, g.metrics.len(), calibration, timing.tolerance)
        .map_or_else(|| done(current), done)
}

/// The rebalanced ratio's verdict: `None` keeps `current` (within tolerance, or the
/// direction flipped), otherwise the new count unless it contradicts the direction.
fn settle(current: i64, ratio: f64, new_ratio: f64, pods: usize, calibration: f64, tolerance: f64) -> Option<i64> {
    if (1.0 - new_ratio).abs() <= tolerance || (ratio < 1.0 && new_ratio > 1.0) || (ratio > 1.0 && new_ratio < 1.0) {
        return None;
    }
    let replicas = (new_ratio * pods as f64 / calibration).ceil() as i64;
    if (new_ratio < 1.0 && replicas > current) || (new_ratio > 1.0 && replicas < current) {
        return None;
    }
    Some(replicas)
}

/// Replicas for a resource metric with an `AverageValue` target (Kubernetes'
/// `GetRawResourceReplicas`): the grouped samples, unready ones included, go to
/// [`plain_metric`].
pub fn resource_average(
    current: i64,
    target: i64,
    resource: &str,
    container: Option<&str>,
    measured: &Measured<'_>,
) -> Result<Calculated, MetricError> {
    let Measured { pods, calibration, timing, now } = *measured;
    let g = group(pods, resource, container, timing, now);
    if g.metrics.is_empty() {
        return Err(MetricError::NoMetrics);
    }
    let (replicas, average) =
        plain_metric(current, target, g.metrics, g.ready, &g.unready, &g.missing, calibration, timing.tolerance);
    Ok(Calculated { replicas, utilization: None, average })
}

/// Kubernetes' `calcPlainMetricReplicas`: (replicas, average usage).
#[allow(clippy::too_many_arguments)] // mirrors the upstream signature the vectors exercise
pub fn plain_metric(
    current: i64,
    target: i64,
    mut metrics: BTreeMap<String, i64>,
    ready: i64,
    unready: &BTreeSet<String>,
    missing: &BTreeSet<String>,
    calibration: f64,
    tolerance: f64,
) -> (i64, i64) {
    let ratio_of = |m: &BTreeMap<String, i64>| {
        let usage = m.values().sum::<i64>() / m.len().max(1) as i64;
        (usage as f64 / target as f64, usage)
    };
    let (ratio, usage) = ratio_of(&metrics);
    let scale_up_with_unready = !unready.is_empty() && ratio > 1.0;
    if !scale_up_with_unready && missing.is_empty() {
        if (1.0 - ratio).abs() <= tolerance {
            return (current, usage);
        }
        return ((ratio * ready as f64 / calibration).ceil() as i64, usage);
    }
    if !missing.is_empty() {
        for pod in missing {
            // Scaling down: a missing pod counts as exactly on target; up: as zero.
            if ratio < 1.0 {
                metrics.insert(pod.clone(), target);
            } else if ratio > 1.0 {
                metrics.insert(pod.clone(), 0);
            }
        }
    }
    if scale_up_with_unready {
        for pod in unready {
            metrics.insert(pod.clone(), 0);
        }
    }
    let (new_ratio, _) = ratio_of(&metrics);
    (settle(current, ratio, new_ratio, metrics.len(), calibration, tolerance).unwrap_or(current), usage)
}

/// Kubernetes' `getUsageRatioReplicaCount`, the rule for `Object` metrics with a
/// `Value` target. flotilla does not read the custom metrics API that feeds it; it is
/// here, tested against Karmada's vector, for when it does.
pub fn usage_ratio_replicas(current: i64, ratio: f64, ready_pods: i64, calibration: f64, tolerance: f64) -> i64 {
    if current == 0 {
        return ratio.ceil() as i64;
    }
    if (1.0 - ratio).abs() <= tolerance {
        return current;
    }
    (ratio * ready_pods as f64 / calibration).ceil() as i64
}
