//! `propagateDeps`: the ConfigMaps, Secrets, ServiceAccount and PVCs a workload's pod
//! spec references follow it to its clusters (spec §7.3); derived objects (a
//! ServiceImport's `derived-<name>` Service) always follow their source.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::model::{ObjectKey, Template};

/// Where the pod spec of a pod-bearing kind lives.
fn pod_spec<'v>(group: &str, kind: &str, o: &'v Value) -> Option<&'v Value> {
    match (group, kind) {
        ("", "Pod") => o.get("spec"),
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet") | ("batch", "Job") => {
            o.pointer("/spec/template/spec")
        }
        ("batch", "CronJob") => o.pointer("/spec/jobTemplate/spec/template/spec"),
        _ => None,
    }
}

/// Objects a template's pod spec references, in its namespace (read from
/// [`crate::model::Facts`], taken when the template was parsed).
pub fn referenced(template: &Template) -> BTreeSet<ObjectKey> {
    let Some(ns) = template.key.namespace.as_deref() else {
        return BTreeSet::new();
    };
    let key = |kind: &str, name: &str| ObjectKey {
        api_version: "v1".into(),
        kind: kind.into(),
        namespace: Some(ns.into()),
        name: name.into(),
    };
    let native = template.facts.references.iter().map(|(kind, name)| key(kind, name));
    native.chain(template.facts.interpreted.iter().cloned()).collect()
}

/// The (kind, name) of each object the pod spec of an object of `group` and `kind`
/// references, sorted and without repeats.
pub fn references(group: &str, kind: &str, object: &Value) -> Vec<(&'static str, Box<str>)> {
    let mut out = BTreeSet::new();
    let Some(spec) = pod_spec(group, kind, object) else {
        return Vec::new();
    };
    let str_at = |v: &Value, path: &str| v.pointer(path).and_then(Value::as_str).map(Box::<str>::from);
    let mut add = |kind: &'static str, name: Option<Box<str>>| {
        if let Some(name) = name.filter(|n| !n.is_empty()) {
            out.insert((kind, name));
        }
    };
    add("ServiceAccount", str_at(spec, "/serviceAccountName").filter(|n| &**n != "default"));
    for secret in spec.get("imagePullSecrets").and_then(Value::as_array).into_iter().flatten() {
        add("Secret", str_at(secret, "/name"));
    }
    for volume in spec.get("volumes").and_then(Value::as_array).into_iter().flatten() {
        add("ConfigMap", str_at(volume, "/configMap/name"));
        add("Secret", str_at(volume, "/secret/secretName"));
        add("PersistentVolumeClaim", str_at(volume, "/persistentVolumeClaim/claimName"));
        for source in volume.pointer("/projected/sources").and_then(Value::as_array).into_iter().flatten() {
            add("ConfigMap", str_at(source, "/configMap/name"));
            add("Secret", str_at(source, "/secret/name"));
        }
    }
    let containers = ["containers", "initContainers", "ephemeralContainers"]
        .into_iter()
        .flat_map(|f| spec.get(f).and_then(Value::as_array).into_iter().flatten());
    for container in containers {
        for env in container.get("env").and_then(Value::as_array).into_iter().flatten() {
            add("ConfigMap", str_at(env, "/valueFrom/configMapKeyRef/name"));
            add("Secret", str_at(env, "/valueFrom/secretKeyRef/name"));
        }
        for from in container.get("envFrom").and_then(Value::as_array).into_iter().flatten() {
            add("ConfigMap", str_at(from, "/configMapRef/name"));
            add("Secret", str_at(from, "/secretRef/name"));
        }
    }
    out.into_iter().collect()
}
