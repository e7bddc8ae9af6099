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
    if (group, kind) == ("networking.k8s.io", "Ingress") {
        return ingress_secrets(object);
    }
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
        // The volume plugins whose credentials are Secrets (Karmada's lifted
        // VisitPodSecretNames).
        add("Secret", str_at(volume, "/azureFile/secretName"));
        for plugin in ["cephfs", "cinder", "flexVolume", "rbd", "scaleIO", "iscsi", "storageos"] {
            add("Secret", volume.get(plugin).and_then(|p| str_at(p, "/secretRef/name")));
        }
        add("Secret", str_at(volume, "/csi/nodePublishSecretRef/name"));
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
    if (group, kind) == ("apps", "StatefulSet") {
        without_own_claims(&mut out, object);
    }
    out.into_iter().collect()
}

/// Karmada's getIngressDependencies: the TLS Secrets.
fn ingress_secrets(object: &Value) -> Vec<(&'static str, Box<str>)> {
    let tls = object.pointer("/spec/tls").and_then(Value::as_array).into_iter().flatten();
    let names = tls.filter_map(|t| t.get("secretName").and_then(Value::as_str)).filter(|n| !n.is_empty());
    names.map(|n| ("Secret", n.into())).collect::<BTreeSet<_>>().into_iter().collect()
}

/// A StatefulSet's own claims (volumeClaimTemplates) are made by the StatefulSet in the
/// member: a PVC of that name in the pod spec is not a dependency.
fn without_own_claims(out: &mut BTreeSet<(&'static str, Box<str>)>, object: &Value) {
    for claim in object.pointer("/spec/volumeClaimTemplates").and_then(Value::as_array).into_iter().flatten() {
        if let Some(name) = claim.pointer("/metadata/name").and_then(Value::as_str) {
            out.remove(&("PersistentVolumeClaim", name.into()));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::references;

    fn names(group: &str, kind: &str, object: serde_json::Value) -> Vec<String> {
        references(group, kind, &object).into_iter().map(|(k, n)| format!("{k}/{n}")).collect()
    }

    /// Karmada's `Test_getIngressDependencies` "ingress with dependencies 2".
    #[test]
    fn get_ingress_dependencies_ingress_with_dependencies_2() {
        let ingress = json!({"spec": {"tls": [{"secretName": "cloud-secret"}, {"secretName": "test-secret"}]}});
        assert_eq!(names("networking.k8s.io", "Ingress", ingress), ["Secret/cloud-secret", "Secret/test-secret"]);
    }

    /// Karmada's `Test_getStatefulSetDependencies` "statefulset with partial dependencies 4":
    /// the PVC a volumeClaimTemplate makes is left out.
    #[test]
    fn get_statefulset_dependencies_statefulset_with_partial_dependencies_4() {
        let pod = json!({
            "serviceAccountName": "test-serviceaccount",
            "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "test-pvc"}},
                        {"name": "c", "configMap": {"name": "test-configmap"}}],
            "imagePullSecrets": [{"name": "test-secret"}],
        });
        let with = |claims: serde_json::Value| json!({"spec": {"template": {"spec": pod.clone()}, "volumeClaimTemplates": claims}});
        let all = names("apps", "StatefulSet", with(json!([])));
        assert_eq!(
            all,
            [
                "ConfigMap/test-configmap",
                "PersistentVolumeClaim/test-pvc",
                "Secret/test-secret",
                "ServiceAccount/test-serviceaccount"
            ]
        );
        let partial = names("apps", "StatefulSet", with(json!([{"metadata": {"name": "test-pvc"}}])));
        assert_eq!(partial, ["ConfigMap/test-configmap", "Secret/test-secret", "ServiceAccount/test-serviceaccount"]);
    }

    /// Karmada's lifted `TestPodSecrets`: every volume plugin's Secret is followed.
    #[test]
    fn pod_secrets() {
        let pod = json!({"spec": {"volumes": [
            {"azureFile": {"secretName": "Spec.Volumes[*].VolumeSource.AzureFile.SecretName"}},
            {"cephfs": {"secretRef": {"name": "Spec.Volumes[*].VolumeSource.CephFS.SecretRef"}}},
            {"cinder": {"secretRef": {"name": "Spec.Volumes[*].VolumeSource.Cinder.SecretRef"}}},
            {"flexVolume": {"secretRef": {"name": "Spec.Volumes[*].VolumeSource.FlexVolume.SecretRef"}}},
            {"projected": {"sources": [{"secret": {"name": "Spec.Volumes[*].VolumeSource.Projected.Sources[*].Secret"}}]}},
            {"rbd": {"secretRef": {"name": "Spec.Volumes[*].VolumeSource.RBD.SecretRef"}}},
            {"secret": {"secretName": "Spec.Volumes[*].VolumeSource.Secret.SecretName"}},
            {"scaleIO": {"secretRef": {"name": "Spec.Volumes[*].VolumeSource.ScaleIO.SecretRef"}}},
            {"iscsi": {"secretRef": {"name": "Spec.Volumes[*].VolumeSource.ISCSI.SecretRef"}}},
            {"storageos": {"secretRef": {"name": "Spec.Volumes[*].VolumeSource.StorageOS.SecretRef"}}},
            {"csi": {"nodePublishSecretRef": {"name": "Spec.Volumes[*].VolumeSource.CSI.NodePublishSecretRef"}}},
        ]}});
        assert_eq!(names("", "Pod", pod).len(), 11);
    }
}
