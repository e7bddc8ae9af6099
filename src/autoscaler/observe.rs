//! What the members say about a FederatedHPA's target: its replicas in each member it
//! is placed on, its pods there, and their samples from that member's
//! `metrics.k8s.io/v1beta1` API (what metrics-server serves). A member that does not
//! answer is left out, which lowers the calibration as Karmada's does for clusters that
//! are not ready; a member without a metrics API leaves its pods "missing".

use std::collections::BTreeMap;

use flotilla_core::autoscale::{Pod, PodPhase, Ready, Usage};
use flotilla_core::model::ObjectKey;
use k8s_openapi::api::core::v1::Pod as KubePod;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::config::Kubeconfig;
use serde_json::Value;

use crate::clusters;

/// The target as observed in the members.
#[derive(Debug, Default)]
pub struct Observed {
    /// Sum of the target's `spec.replicas` over the members that answered.
    pub replicas: i64,
    /// Pods pooled over those members, named `<cluster>/<pod>`.
    pub pods: Vec<Pod>,
    /// Members that could not be read, with why.
    pub failed: Vec<(String, String)>,
}

/// The metrics API's PodMetrics resource.
fn pod_metrics() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("metrics.k8s.io", "v1beta1", "PodMetrics"), "pods")
}

/// How a sync reaches the members: clients from the controller's pool, shared with
/// its reconciles.
#[derive(Clone, Copy)]
pub struct Clients<'a> {
    /// The controller's member clients.
    pub pool: &'a clusters::connect::Pool,
    /// Member credentials.
    pub kubeconfig: &'a Kubeconfig,
    /// Which credentials to trust.
    pub trust: clusters::connect::Trust,
    /// Per-request timeout.
    pub timeout: std::time::Duration,
}

impl Clients<'_> {
    async fn get(&self, cluster: &str) -> Result<kube::Client, String> {
        self.pool
            .client(self.kubeconfig, cluster, self.trust, self.timeout, None)
            .await
            .map_err(|e| format!("{:#}", anyhow::Error::new(e)))
    }
}

/// Reads the target (a Deployment, StatefulSet or ReplicaSet) in `clusters`.
pub async fn observe(clients: Clients<'_>, clusters: &[String], target: &ObjectKey) -> Observed {
    let mut work = Vec::new();
    for cluster in clusters {
        let client = clients.get(cluster).await;
        work.push(async move { member(client?, cluster, target).await });
    }
    let results = futures::future::join_all(work).await;
    let mut out = Observed::default();
    for (cluster, result) in clusters.iter().zip(results) {
        match result {
            Ok((replicas, pods)) => {
                out.replicas += replicas;
                out.pods.extend(pods);
            }
            Err(e) => out.failed.push((cluster.clone(), e)),
        }
    }
    out
}

async fn member(client: kube::Client, cluster: &str, target: &ObjectKey) -> Result<(i64, Vec<Pod>), String> {
    let namespace = target.namespace.as_deref().unwrap_or("default");
    let version = target.api_version.rsplit('/').next().unwrap_or_default();
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(target.group(), version, &target.kind));
    let workload: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    let Some(live) = workload.get_opt(&target.name).await.map_err(|e| format!("reading {target}: {e}"))? else {
        return Ok((0, Vec::new()));
    };
    let replicas = live.data.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1);
    let selector = selector(live.data.pointer("/spec/selector"))
        .ok_or_else(|| format!("{target} has no label selector to find its pods by"))?;
    let pods: Api<KubePod> = Api::namespaced(client.clone(), namespace);
    let listed = pods.list(&ListParams::default().labels(&selector)).await.map_err(|e| format!("listing pods: {e}"))?;
    let metrics: Api<DynamicObject> = Api::namespaced_with(client, namespace, &pod_metrics());
    let samples: BTreeMap<String, Usage> = match metrics.list(&ListParams::default()).await {
        Ok(list) => list.items.iter().filter_map(|m| Some((m.metadata.name.clone()?, usage(&m.data)?))).collect(),
        Err(e) => {
            tracing::warn!(cluster, error = %e, "no metrics.k8s.io in this member; its pods count as unmeasured");
            BTreeMap::new()
        }
    };
    let pods = listed.items.iter().map(|p| pod(cluster, p, &samples)).collect();
    Ok((replicas, pods))
}

/// `spec.selector` as a label selector string.
fn selector(selector: Option<&Value>) -> Option<String> {
    let selector = selector?;
    let mut terms: Vec<String> = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    for expr in selector.get("matchExpressions").and_then(Value::as_array).into_iter().flatten() {
        let key = expr.get("key")?.as_str()?;
        let values: Vec<&str> =
            expr.get("values").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        terms.push(match expr.get("operator")?.as_str()? {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_owned(),
            "DoesNotExist" => format!("!{key}"),
            _ => return None,
        });
    }
    (!terms.is_empty()).then(|| terms.join(","))
}

fn seconds(time: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> i64 {
    time.0.as_second()
}

fn rfc3339(value: Option<&Value>) -> Option<i64> {
    value?.as_str()?.parse::<k8s_openapi::jiff::Timestamp>().ok().map(|t| t.as_second())
}

/// Kubernetes duration strings as metrics-server writes `window` (`"15s"`, `"1m0s"`).
fn duration(text: &str) -> Option<i64> {
    let mut total = 0.0;
    let mut number = String::new();
    for c in text.chars() {
        match c {
            '0'..='9' | '.' => number.push(c),
            'h' | 'm' | 's' => {
                let n: f64 = number.parse().ok()?;
                total += n * match c {
                    'h' => 3600.0,
                    'm' => 60.0,
                    _ => 1.0,
                };
                number.clear();
            }
            _ => return None,
        }
    }
    number.is_empty().then_some(total as i64)
}

fn usage(data: &Value) -> Option<Usage> {
    let mut containers = BTreeMap::new();
    for c in data.get("containers")?.as_array()? {
        let name = c.get("name")?.as_str()?.to_owned();
        let usage = c
            .get("usage")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(resource, q)| Some((resource.clone(), flotilla_core::autoscale::quantity(q)?)))
            .collect();
        containers.insert(name, usage);
    }
    Some(Usage {
        timestamp: rfc3339(data.get("timestamp"))?,
        window: data.get("window").and_then(Value::as_str).and_then(duration).unwrap_or(0),
        containers,
    })
}

fn pod(cluster: &str, pod: &KubePod, samples: &BTreeMap<String, Usage>) -> Pod {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let status = pod.status.as_ref();
    let phase = match status.and_then(|s| s.phase.as_deref()) {
        Some("Pending") => PodPhase::Pending,
        Some("Running") => PodPhase::Running,
        Some("Succeeded") => PodPhase::Succeeded,
        Some("Failed") => PodPhase::Failed,
        _ => PodPhase::Unknown,
    };
    let ready =
        status.and_then(|s| s.conditions.as_ref()).and_then(|cs| cs.iter().find(|c| c.type_ == "Ready")).map(|c| {
            Ready { status: c.status == "True", last_transition: c.last_transition_time.as_ref().map_or(0, seconds) }
        });
    let requests = pod
        .spec
        .iter()
        .flat_map(|s| &s.containers)
        .map(|c| {
            let requested = c
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .into_iter()
                .flatten()
                .filter_map(|(k, q)| {
                    Some((k.clone(), flotilla_core::autoscale::quantity(&Value::String(q.0.clone()))?))
                })
                .collect();
            (c.name.clone(), requested)
        })
        .collect();
    Pod {
        name: format!("{cluster}/{name}"),
        phase,
        deleted: pod.metadata.deletion_timestamp.is_some(),
        ready,
        start_time: status.and_then(|s| s.start_time.as_ref()).map(seconds),
        requests,
        usage: samples.get(&name).cloned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_and_durations_read_as_kubernetes_writes_them() {
        let s = serde_json::json!({"matchLabels": {"app": "nginx"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]});
        assert_eq!(selector(Some(&s)).unwrap(), "app=nginx,tier in (a,b)");
        assert_eq!(selector(Some(&serde_json::json!({}))), None);
        assert_eq!(duration("15s"), Some(15));
        assert_eq!(duration("1m0s"), Some(60));
        assert_eq!(duration("1h2m3s"), Some(3723));
        assert_eq!(duration("soon"), None);
    }
}
