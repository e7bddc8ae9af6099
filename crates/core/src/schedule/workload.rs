//! What placement reads from a template's object: replicas, requests of one pod and
//! Job completions (spec §6.2), taken once when the object is parsed.

use serde_json::Value;

use super::capacity::{self, Requests};

/// What placement needs to know about a template (spec §6.2).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Workload {
    /// Desired replicas (Deployment/ReplicaSet/StatefulSet `spec.replicas`, Job
    /// `parallelism` capped at `completions`, 1 for a Pod, else 0).
    pub replicas: i64,
    /// Resource requests of one pod.
    pub requests: Requests,
    /// Job `spec.completions`.
    pub completions: Option<i64>,
}

impl Workload {
    /// Karmada schedules replica counts only for workloads: replicas or requests.
    pub fn is_workload(&self) -> bool {
        self.replicas > 0 || !self.requests.is_empty()
    }
}

/// Reads replicas and requests of an object of `group` and `kind`. A missing
/// `spec.replicas` (or Job `parallelism`) is 1, the value the API server's defaulting
/// gives the template in Karmada's control plane.
pub fn workload_of(group: &str, kind: &str, object: &Value) -> Workload {
    let int = |path: &str| object.pointer(path).and_then(Value::as_i64);
    let (replicas, pod) = match (group, kind) {
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet") => {
            (int("/spec/replicas").unwrap_or(1), "/spec/template/spec")
        }
        ("batch", "Job") => {
            let parallelism = int("/spec/parallelism").unwrap_or(1);
            (int("/spec/completions").map_or(parallelism, |c| parallelism.min(c)), "/spec/template/spec")
        }
        ("", "Pod") => (1, "/spec"),
        _ => return Workload::default(),
    };
    // A Job with neither field is defaulted to one of each by the API server (so
    // Karmada's template holds `completions: 1`).
    let completions = match kind {
        "Job" if int("/spec/completions").is_none() && int("/spec/parallelism").is_none() => Some(1),
        "Job" => int("/spec/completions"),
        _ => None,
    };
    Workload { replicas: replicas.max(0), requests: pod_requests(object.pointer(pod)), completions }
}

fn pod_requests(pod: Option<&Value>) -> Requests {
    let mut requests = Requests::new();
    let containers = pod.and_then(|p| p.get("containers")).and_then(Value::as_array).into_iter().flatten();
    for container in containers {
        let Some(map) = container.pointer("/resources/requests").and_then(Value::as_object) else {
            continue;
        };
        for (name, quantity) in map {
            let q = quantity.as_str().map(str::to_owned).unwrap_or_else(|| quantity.to_string());
            *requests.entry(name.clone()).or_default() += capacity::milli(&q).unwrap_or(0);
        }
    }
    requests
}
