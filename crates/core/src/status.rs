//! Health of live objects and their status summed across clusters, as Karmada's
//! resource interpreter does (spec §7.1–§7.2). Pure: the executor passes live objects.

use std::fmt;

use serde_json::{Map, Value};

use crate::model::ObjectKey;

/// Health of one object in one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// As desired and settled.
    Healthy,
    /// Rolling out or waiting; the detail says on what.
    Progressing(String),
    /// Failed (e.g. a rollout past its progress deadline, a failed Job).
    Degraded(String),
    /// Not in the cluster.
    Missing,
}

impl fmt::Display for Health {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Health::Healthy => write!(f, "Healthy"),
            Health::Progressing(why) => write!(f, "Progressing ({why})"),
            Health::Degraded(why) => write!(f, "Degraded ({why})"),
            Health::Missing => write!(f, "Missing"),
        }
    }
}

fn int(v: &Value, path: &str) -> i64 {
    v.pointer(path).and_then(Value::as_i64).unwrap_or(0)
}

fn condition<'a>(v: &'a Value, kind: &str) -> Option<&'a Value> {
    v.pointer("/status/conditions")?.as_array()?.iter().find(|c| c["type"] == kind)
}

/// Health by kind. Deployment follows Karmada's rule (observed generation current,
/// updated ≥ desired, available ≥ updated); other workloads the analogous counters;
/// CRDs must be Established; anything else is healthy once it exists.
pub fn health(key: &ObjectKey, live: Option<&Value>) -> Health {
    let Some(o) = live else { return Health::Missing };
    let stale = int(o, "/status/observedGeneration") < int(o, "/metadata/generation");
    let desired = o.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1);
    match (key.group(), key.kind.as_str()) {
        ("apps", "Deployment") => {
            if condition(o, "Progressing").is_some_and(|c| c["reason"] == "ProgressDeadlineExceeded") {
                return Health::Degraded("progress deadline exceeded".into());
            }
            let (updated, available) = (int(o, "/status/updatedReplicas"), int(o, "/status/availableReplicas"));
            counters(stale, updated >= desired && available >= updated, format!("{available}/{desired} available"))
        }
        ("apps", "StatefulSet") => {
            let ready = int(o, "/status/readyReplicas");
            counters(
                stale,
                ready >= desired && int(o, "/status/updatedReplicas") >= desired,
                format!("{ready}/{desired} ready"),
            )
        }
        ("apps", "ReplicaSet") => {
            let ready = int(o, "/status/readyReplicas");
            counters(stale, ready >= desired, format!("{ready}/{desired} ready"))
        }
        ("apps", "DaemonSet") => {
            let (want, available) = (int(o, "/status/desiredNumberScheduled"), int(o, "/status/numberAvailable"));
            counters(
                stale,
                available >= want && int(o, "/status/updatedNumberScheduled") >= want,
                format!("{available}/{want} available"),
            )
        }
        ("batch", "Job") => match (condition(o, "Complete"), condition(o, "Failed")) {
            (_, Some(c)) if c["status"] == "True" => Health::Degraded("job failed".into()),
            (Some(c), _) if c["status"] == "True" => Health::Healthy,
            _ => Health::Progressing("running".into()),
        },
        ("apiextensions.k8s.io", "CustomResourceDefinition") => match condition(o, "Established") {
            Some(c) if c["status"] == "True" => Health::Healthy,
            _ => Health::Progressing("not established".into()),
        },
        _ => Health::Healthy,
    }
}

/// Health as the revision's interpreter judges it: by the kind's `InterpretHealth`
/// script when a customization has one (Karmada's answer is healthy or not; not healthy
/// is Degraded, as Karmada's Unhealthy, and so is a script that fails), else [`health`].
pub fn interpreted(interpreter: &crate::interpret::Interpreter, key: &ObjectKey, live: Option<&Value>) -> Health {
    let Some(object) = live else { return Health::Missing };
    match interpreter.healthy(key, object) {
        None => health(key, live),
        Some(Ok(true)) => Health::Healthy,
        Some(Ok(false)) => Health::Degraded("not healthy by its InterpretHealth".into()),
        Some(Err(e)) => Health::Degraded(e.to_string()),
    }
}

fn counters(stale: bool, settled: bool, detail: String) -> Health {
    if stale {
        Health::Progressing("generation not observed yet".into())
    } else if settled {
        Health::Healthy
    } else {
        Health::Progressing(detail)
    }
}

/// The status fields Karmada sums per kind (`aggregatestatus.go`).
fn summed_fields(key: &ObjectKey) -> &'static [&'static str] {
    match (key.group(), key.kind.as_str()) {
        ("apps", "Deployment") => {
            &["replicas", "readyReplicas", "updatedReplicas", "availableReplicas", "unavailableReplicas"]
        }
        ("apps", "ReplicaSet") => &["replicas", "readyReplicas", "availableReplicas"],
        ("apps", "StatefulSet") => {
            &["availableReplicas", "currentReplicas", "readyReplicas", "replicas", "updatedReplicas"]
        }
        ("apps", "DaemonSet") => &[
            "currentNumberScheduled",
            "desiredNumberScheduled",
            "numberAvailable",
            "numberMisscheduled",
            "numberReady",
            "updatedNumberScheduled",
            "numberUnavailable",
        ],
        _ => &[],
    }
}

/// Sums member statuses into one template status; `None` for kinds Karmada does not
/// sum.
pub fn aggregate<'a>(key: &ObjectKey, statuses: impl IntoIterator<Item = &'a Value>) -> Option<Value> {
    let fields = summed_fields(key);
    if fields.is_empty() {
        return None;
    }
    let mut sums = vec![0i64; fields.len()];
    for status in statuses {
        for (sum, field) in sums.iter_mut().zip(fields) {
            *sum += status.get(*field).and_then(Value::as_i64).unwrap_or(0);
        }
    }
    let map: Map<String, Value> = fields.iter().zip(sums).map(|(f, s)| ((*f).to_owned(), Value::from(s))).collect();
    Some(Value::Object(map))
}

/// One member's copy of an object, as `AggregateStatus` is told of it.
#[derive(Debug, Clone, Copy)]
pub struct InMember<'a> {
    /// The member.
    pub cluster: &'a str,
    /// Its health there.
    pub health: &'a Health,
    /// The status it reports (its `ReflectStatus`, else `status`).
    pub status: Option<&'a Value>,
}

/// The template's status made of its members', as the revision's interpreter makes it:
/// by the kind's `AggregateStatus` script when a customization has one (given Karmada's
/// `statusItems`: `clusterName`, `status`, `applied`, and `health` as `Healthy`,
/// `Unhealthy` or `Unknown`), else [`aggregate`]'s sums; `None` when neither answers.
/// The template is made only for a script.
pub fn aggregated(
    interpreter: &crate::interpret::Interpreter,
    key: &ObjectKey,
    template: impl FnOnce() -> Value,
    members: &[InMember<'_>],
) -> Option<Result<Value, crate::interpret::InterpretError>> {
    let operation = crate::interpret::Operation::AggregateStatus;
    if interpreter.script(&key.api_version, &key.kind, operation).is_none() {
        return aggregate(key, members.iter().filter_map(|m| m.status)).map(Ok);
    }
    let items: Vec<Value> = members
        .iter()
        .map(|m| {
            let health = match m.health {
                Health::Healthy => "Healthy",
                Health::Missing => "Unknown",
                Health::Progressing(_) | Health::Degraded(_) => "Unhealthy",
            };
            let mut item = serde_json::json!({
                "clusterName": m.cluster,
                "applied": *m.health != Health::Missing,
                "health": health,
            });
            if let Some(status) = m.status {
                item["status"] = status.clone();
            }
            item
        })
        .collect();
    interpreter.aggregate_status(key, &template(), &Value::Array(items))
}

/// The status a member's copy reports: its `ReflectStatus` when a customization has one,
/// else its `status`.
pub fn reflected(
    interpreter: &crate::interpret::Interpreter,
    key: &ObjectKey,
    live: &Value,
) -> Result<Option<Value>, crate::interpret::InterpretError> {
    match interpreter.reflect_status(key, live) {
        Some(answer) => answer.map(|s| Some(s).filter(|s| !s.is_null())),
        None => Ok(live.get("status").cloned()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn deployment() -> ObjectKey {
        ObjectKey {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            namespace: Some("d".into()),
            name: "x".into(),
        }
    }

    #[test]
    fn deployment_health_follows_karmadas_rule() {
        let settled = json!({"metadata": {"generation": 2}, "spec": {"replicas": 3},
            "status": {"observedGeneration": 2, "updatedReplicas": 3, "availableReplicas": 3}});
        assert_eq!(health(&deployment(), Some(&settled)), Health::Healthy);
        let rolling = json!({"metadata": {"generation": 2}, "spec": {"replicas": 3},
            "status": {"observedGeneration": 2, "updatedReplicas": 3, "availableReplicas": 1}});
        assert_eq!(health(&deployment(), Some(&rolling)), Health::Progressing("1/3 available".into()));
        let stale = json!({"metadata": {"generation": 3}, "spec": {"replicas": 3},
            "status": {"observedGeneration": 2, "updatedReplicas": 3, "availableReplicas": 3}});
        assert!(matches!(health(&deployment(), Some(&stale)), Health::Progressing(_)));
        let stuck = json!({"metadata": {"generation": 1}, "status": {"observedGeneration": 1,
            "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]}});
        assert!(matches!(health(&deployment(), Some(&stuck)), Health::Degraded(_)));
        assert_eq!(health(&deployment(), None), Health::Missing);
    }
}
