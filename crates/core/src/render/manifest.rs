//! The manifest of one rendered entry: the template with its replicas revised, its
//! overrides applied, flotilla's labels and annotations added and the fields the API
//! server owns stripped.

use serde_json::{Map, Value};

use super::*;

impl Plan {
    /// The full object for one rendered entry.
    pub fn manifest(&self, rendered: &Rendered) -> Result<Value, OverrideError> {
        materialize(&self.loaded, rendered)
    }

    /// Every manifest of one cluster, in output order.
    pub fn manifests<'a>(&'a self, cluster: &str) -> impl Iterator<Item = Result<Value, OverrideError>> + 'a {
        self.clusters.get(cluster).into_iter().flatten().map(|r| self.manifest(r))
    }
}

fn materialize(loaded: &Loaded, rendered: &Rendered) -> Result<Value, OverrideError> {
    let template = &loaded.templates[rendered.template];
    let mut object = template.object();
    revise_replicas(&mut object, &template.key, rendered.replicas, rendered.completions);
    overrides::apply(&mut object, loaded, &rendered.overrides)?;
    if template.labels.get(RETAIN_REPLICAS_LABEL) == Some("true") {
        release_replicas(&mut object);
    }
    decorate(&mut object, loaded, template, rendered.source);
    strip(&mut object, &template.key);
    Ok(object)
}

/// Karmada's binding name for a template: `lower(name with ':' → '.') + "-" + lower(kind)`
/// (`GenerateBindingName`, vector `names-binding-table`). flotilla has no binding objects;
/// this is for tools that correlate flotilla's output with a Karmada installation.
pub fn binding_name(kind: &str, name: &str) -> String {
    format!("{}-{}", name.replace(':', "."), kind).to_lowercase()
}

/// Sets the assigned replicas: Deployment, ReplicaSet, StatefulSet `spec.replicas`;
/// Job `spec.parallelism` (and `spec.completions` when split).
pub fn revise_replicas(object: &mut Value, key: &ObjectKey, replicas: Option<i64>, completions: Option<i64>) {
    let field = match (key.group(), key.kind.as_str()) {
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet") => "replicas",
        ("batch", "Job") => "parallelism",
        _ => return,
    };
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(r) = replicas {
        spec.insert(field.into(), Value::from(r));
    }
    if let Some(c) = completions {
        spec.insert("completions".into(), Value::from(c));
    }
}

fn decorate(object: &mut Value, loaded: &Loaded, template: &Template, source: Source) {
    let (policy, resolution, preserve) = match source {
        Source::Policy(p) => {
            let policy = &loaded.propagation_policies[p];
            let overwrite = policy.spec.conflict_resolution == Some(ConflictResolution::Overwrite);
            let preserve = policy.spec.preserve_resources_on_deletion.unwrap_or(false);
            (policy.describe("PropagationPolicy", "ClusterPropagationPolicy"), overwrite, preserve)
        }
        Source::NamespaceSync => ("namespace-sync".to_owned(), false, false),
        Source::Dependency => ("dependency".to_owned(), false, false),
        // Karmada's MultiClusterService controller binds the Service with Overwrite.
        Source::MultiClusterService(m) => {
            (loaded.multi_cluster_services[m].describe("MultiClusterService", "MultiClusterService"), true, false)
        }
    };
    let resolution = conflict_resolution(template.facts.conflict_resolution.as_deref(), resolution);
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let labels = object_map(metadata, "labels");
    labels.insert(MANAGED_LABEL.into(), "true".into());
    let annotations = object_map(metadata, "annotations");
    annotations.insert(POLICY_ANNOTATION.into(), policy.into());
    annotations.insert(SOURCE_ANNOTATION.into(), template.origin.file.to_string().into());
    annotations.insert(CONFLICT_ANNOTATION.into(), resolution.into());
    if preserve {
        annotations.insert(PRESERVE_ANNOTATION.into(), "true".into());
    }
}

/// Drops `spec.replicas` so server-side apply leaves it to whoever scales the workload
/// in the member (Karmada's retain-replicas; a member HPA).
pub fn release_replicas(object: &mut Value) {
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("replicas");
    }
}

/// Karmada's `mergeConflictResolution`: a template annotation of `overwrite` or `abort`
/// wins; otherwise the policy's choice.
pub fn conflict_resolution(template_annotation: Option<&str>, policy_overwrite: bool) -> &'static str {
    match template_annotation {
        Some("overwrite") => "overwrite",
        Some("abort") => "abort",
        _ if policy_overwrite => "overwrite",
        _ => "abort",
    }
}

fn object_map<'a>(metadata: &'a mut Map<String, Value>, field: &str) -> &'a mut Map<String, Value> {
    let entry = metadata.entry(field).or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    entry.as_object_mut().expect("just made an object")
}

/// Removes what members must not receive (spec §6.3 step 10), plus
/// `kubectl.kubernetes.io/last-applied-configuration`, which can carry a whole Secret.
pub fn strip(object: &mut Value, key: &ObjectKey) {
    let Some(root) = object.as_object_mut() else {
        return;
    };
    root.remove("status");
    if let Some(metadata) = root.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in [
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "managedFields",
            "resourceVersion",
            "selfLink",
            "uid",
            "ownerReferences",
            "finalizers",
        ] {
            metadata.remove(field);
        }
        if let Some(annotations) = metadata.get_mut("annotations").and_then(Value::as_object_mut) {
            annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
            if key.kind == "Deployment" {
                annotations.remove("deployment.kubernetes.io/revision");
                annotations.remove("deployment.kubernetes.io/revision-history");
            }
            if key.kind == "PersistentVolumeClaim" {
                annotations.remove("volume.kubernetes.io/selected-node");
            }
        }
    }
    let spec = root.get_mut("spec").and_then(Value::as_object_mut);
    match (key.group(), key.kind.as_str(), spec) {
        ("", "Service", Some(spec)) if spec.get("clusterIP").and_then(Value::as_str) != Some("None") => {
            spec.remove("clusterIP");
            spec.remove("clusterIPs");
        }
        ("batch", "Job", Some(spec)) => strip_job(spec),
        _ => {}
    }
}

fn strip_job(spec: &mut Map<String, Value>) {
    spec.remove("ttlSecondsAfterFinished");
    if spec.get("manualSelector").and_then(Value::as_bool) == Some(true) {
        return;
    }
    const GENERATED: [&str; 4] =
        ["controller-uid", "batch.kubernetes.io/controller-uid", "job-name", "batch.kubernetes.io/job-name"];
    if let Some(labels) = spec.get_mut("selector").and_then(|s| s.get_mut("matchLabels")).and_then(Value::as_object_mut)
    {
        for l in &GENERATED[..2] {
            labels.remove(*l);
        }
    }
    let template_labels =
        spec.get_mut("template").and_then(|t| t.get_mut("metadata")).and_then(|m| m.get_mut("labels"));
    if let Some(labels) = template_labels.and_then(Value::as_object_mut) {
        for l in GENERATED {
            labels.remove(l);
        }
    }
}
