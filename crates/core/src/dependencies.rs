//! `propagateDeps`: the ConfigMaps, Secrets, ServiceAccount and PVCs a workload's pod
//! spec references follow it to its clusters (spec §7.3); derived objects (a
//! ServiceImport's `derived-<name>` Service) always follow their source.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::model::{ObjectKey, Template};

/// Where the pod spec of a pod-bearing kind lives.
fn pod_spec(template: &Template) -> Option<&Value> {
    let o = &template.object;
    match (template.key.group(), template.key.kind.as_str()) {
        ("", "Pod") => o.get("spec"),
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet") | ("batch", "Job") => {
            o.pointer("/spec/template/spec")
        }
        ("batch", "CronJob") => o.pointer("/spec/jobTemplate/spec/template/spec"),
        _ => None,
    }
}

fn key(kind: &str, namespace: &str, name: &str) -> ObjectKey {
    ObjectKey { api_version: "v1".into(), kind: kind.into(), namespace: Some(namespace.into()), name: name.into() }
}

/// Objects a template's pod spec references, in its namespace.
pub fn referenced(template: &Template) -> BTreeSet<ObjectKey> {
    let mut out = BTreeSet::new();
    let (Some(spec), Some(ns)) = (pod_spec(template), template.key.namespace.as_deref()) else {
        return out;
    };
    let str_at = |v: &Value, path: &str| v.pointer(path).and_then(Value::as_str).map(str::to_owned);
    let mut add = |kind: &str, name: Option<String>| {
        if let Some(name) = name.filter(|n| !n.is_empty()) {
            out.insert(key(kind, ns, &name));
        }
    };
    add("ServiceAccount", str_at(spec, "/serviceAccountName").filter(|n| n != "default"));
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
    out
}
