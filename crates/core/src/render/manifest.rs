//! The manifest of one rendered entry: the template with its replicas revised, its
//! overrides applied, flotilla's labels and annotations added and the fields the API
//! server owns stripped.

use serde_json::{Map, Value};

use super::*;
use crate::model::plan::Revised;

impl Plan {
    /// The full object for one rendered entry.
    pub fn manifest(&self, rendered: &Rendered) -> Result<Value, OverrideError> {
        materialize(&self.loaded, rendered, &self.revised)
    }

    /// Each override rule of one rendered entry with the fields it changes, in the order
    /// they apply: the rules applied one at a time to the template as revised (`why`).
    pub fn override_steps(
        &self,
        rendered: &Rendered,
    ) -> Result<Vec<(overrides::RuleRef, Vec<crate::plan_diff::FieldChange>)>, OverrideError> {
        let mut object = revised(&self.loaded, rendered, &self.revised)?;
        let mut steps = Vec::with_capacity(rendered.overrides.len());
        for rule in &rendered.overrides {
            let before = object.clone();
            overrides::apply(&mut object, &self.loaded, std::slice::from_ref(rule))?;
            steps.push((*rule, crate::plan_diff::field_changes(&before, &object)));
        }
        Ok(steps)
    }

    /// Every manifest of one cluster, in output order.
    pub fn manifests<'a>(&'a self, cluster: &str) -> impl Iterator<Item = Result<Value, OverrideError>> + 'a {
        self.clusters.get(cluster).into_iter().flatten().map(|r| self.manifest(r))
    }
}

fn materialize(loaded: &Loaded, rendered: &Rendered, revised: &Revised) -> Result<Value, OverrideError> {
    let template = &loaded.templates[rendered.template];
    let mut object = self::revised(loaded, rendered, revised)?;
    if let Source::FederatedResourceQuota { quota, assignment } = rendered.source {
        let hard = &loaded.federated_resource_quotas[quota].spec.static_assignments[assignment].hard;
        object["spec"]["hard"] = hard.iter().map(|(k, q)| (k.clone(), Value::from(q.text()))).collect();
    }
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

/// Kubernetes' defaulting of a Job that sets neither `parallelism` nor `completions`:
/// one of each, as the template in Karmada's control plane holds them, so every member
/// receives `completions: 1` (left out, a member would default only what is missing and
/// run the Job as a work queue).
fn default_job(object: &mut Value, key: &ObjectKey) {
    if (key.group(), key.kind.as_str()) != ("batch", "Job") {
        return;
    }
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else { return };
    if !spec.contains_key("parallelism") && !spec.contains_key("completions") {
        spec.insert("parallelism".into(), 1.into());
        spec.insert("completions".into(), 1.into());
    }
}

/// The template of `rendered` (a Job defaulted) with its replicas revised to what
/// `rendered` assigns: by the kind's `ReviseReplica` script when a customization has
/// one (once per count in a plan, held in `revised`), else by the native rule.
pub(super) fn revised(
    loaded: &Loaded,
    rendered: &Rendered,
    revised: &Revised,
) -> Result<Value, crate::interpret::InterpretError> {
    let template = &loaded.templates[rendered.template];
    let key = &template.key;
    let customized = loaded.interpreter.script(&key.api_version, &key.kind, crate::interpret::Operation::Revise);
    if let (Some(replicas), Some(_)) = (rendered.replicas, customized) {
        let answer = revised.get_or(rendered.template, replicas, || {
            let mut object = template.object();
            default_job(&mut object, key);
            match loaded.interpreter.revise(key, &object, replicas) {
                Some(answer) => answer.map(std::sync::Arc::new),
                None => {
                    revise_replicas(&mut object, key, rendered.replicas, rendered.completions);
                    Ok(std::sync::Arc::new(object))
                }
            }
        });
        return answer.map(std::sync::Arc::unwrap_or_clone);
    }
    let mut object = template.object();
    default_job(&mut object, key);
    revise_replicas(&mut object, key, rendered.replicas, rendered.completions);
    Ok(object)
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
        Source::Dependency { overwrite, preserve } => ("dependency".to_owned(), overwrite, preserve),
        // Karmada's MultiClusterService controller binds the Service with Overwrite.
        Source::MultiClusterService(m) => {
            (loaded.multi_cluster_services[m].describe("MultiClusterService", "MultiClusterService"), true, false)
        }
        // A ResourceQuota the member already holds is not taken over unasked.
        Source::FederatedResourceQuota { quota, .. } => (
            loaded.federated_resource_quotas[quota].describe("FederatedResourceQuota", "FederatedResourceQuota"),
            false,
            false,
        ),
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
    match (key.group(), key.kind.as_str()) {
        // The token Secrets a member's token controller made for this account are its own.
        ("", "ServiceAccount") => {
            let prefix = format!("{}-token-", key.name);
            if let Some(secrets) = root.get_mut("secrets").and_then(Value::as_array_mut) {
                secrets.retain(|s| !s.get("name").and_then(Value::as_str).is_some_and(|n| n.starts_with(&prefix)));
            }
        }
        // A service-account token is minted by each member for its own account.
        ("", "Secret") if root.get("type").and_then(Value::as_str) == Some("kubernetes.io/service-account-token") => {
            root.remove("data");
            if let Some(annotations) =
                root.get_mut("metadata").and_then(|m| m.get_mut("annotations")).and_then(Value::as_object_mut)
            {
                annotations.remove("kubernetes.io/service-account.uid");
            }
        }
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::model::{ClusterState, Limits, ObjectKey, RepoFiles};

    fn stripped(kind: &str, name: &str, mut object: serde_json::Value) -> serde_json::Value {
        let key = ObjectKey {
            api_version: "v1".into(),
            kind: kind.into(),
            namespace: Some("default".into()),
            name: name.into(),
        };
        super::strip(&mut object, &key);
        object
    }

    /// Karmada's `TestRemoveIrrelevantField` "remove serviceaccount irrelevant fields".
    #[test]
    fn remove_irrelevant_field_remove_serviceaccount_irrelevant_fields() {
        let account = json!({"metadata": {"name": "foo"}, "secrets": [{"name": "foo-token-6pgxf"}, {"name": "foo-dockercfg-zdr2j"}]});
        assert_eq!(stripped("ServiceAccount", "foo", account)["secrets"], json!([{"name": "foo-dockercfg-zdr2j"}]));
    }

    /// Karmada's "remove service-account token secret irrelevant fields" and "retains
    /// secret basic-auth fields".
    #[test]
    fn remove_irrelevant_field_remove_service_account_token_secret_irrelevant_fields() {
        let token = json!({"metadata": {"annotations": {"kubernetes.io/service-account.uid": "123", "keep": "x"}},
                           "type": "kubernetes.io/service-account-token", "data": {"token": "abc"}});
        let token = stripped("Secret", "t", token);
        assert_eq!(token.get("data"), None);
        assert_eq!(token["metadata"]["annotations"], json!({"keep": "x"}));
        let basic = json!({"metadata": {"foo": "bar"}, "type": "kubernetes.io/basic-auth", "data": {"username": "foo", "password": "bar"}});
        assert_eq!(stripped("Secret", "b", basic.clone()), basic);
    }

    fn manifests(job_spec: &str, placement: &str) -> Vec<serde_json::Value> {
        let clusters: String = (1..=2)
            .map(|m| format!("apiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {{name: m{m}}}\nspec: {{syncMode: Push}}\n---\n"))
            .collect();
        let text = format!(
            "{clusters}apiVersion: batch/v1\nkind: Job\nmetadata: {{name: pi, namespace: default}}\nspec:\n{job_spec}  template: {{spec: {{restartPolicy: Never, containers: [{{name: pi, image: perl}}]}}}}\n---\napiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: pi}}\nspec:\n  resourceSelectors: [{{apiVersion: batch/v1, kind: Job}}]\n  placement:\n    clusterAffinity: {{clusterNames: [m1, m2]}}\n{placement}"
        );
        let mut files = RepoFiles { revision: "r".into(), ..Default::default() };
        files.files.insert("job.yaml".into(), text.into_bytes());
        let plan = crate::plan(&files, &ClusterState::default(), &Limits::default()).unwrap();
        ["m1", "m2"].iter().flat_map(|c| plan.manifests(c).map(Result::unwrap).collect::<Vec<_>>()).collect()
    }

    /// The API server defaults a Job with neither `parallelism` nor `completions` to one
    /// of each; Karmada's template holds both, so each member receives `completions: 1`.
    #[test]
    fn a_job_with_neither_parallelism_nor_completions_gets_one_of_each() {
        for job in manifests("", "") {
            assert_eq!((job["spec"]["parallelism"].as_i64(), job["spec"]["completions"].as_i64()), (Some(1), Some(1)));
        }
        // A work queue (parallelism alone) stays one.
        for job in manifests("  parallelism: 2\n", "") {
            assert!(job["spec"].get("completions").is_none(), "{job}");
        }
    }
}

#[cfg(test)]
mod dependency_tests {
    use crate::model::{ClusterState, Limits, RepoFiles};

    /// `web` (propagateDeps) in two policies' hands over its ConfigMap `settings`: Karmada's
    /// dependencies distributor gives the dependency `Overwrite` when any parent's policy
    /// overwrites and preserves it when any parent's policy preserves.
    #[test]
    fn a_dependency_takes_overwrite_and_preserve_from_any_parent() {
        let deploy = |name: &str| {
            format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec: {{containers: [{{name: c, image: x, envFrom: [{{configMapRef: {{name: settings}}}}]}}]}}\n"
            )
        };
        let policy = |name: &str, extra: &str| {
            format!(
                "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  propagateDeps: true\n{extra}  resourceSelectors: [{{apiVersion: apps/v1, kind: Deployment, name: {name}}}]\n  placement: {{clusterAffinity: {{clusterNames: [m1]}}}}\n"
            )
        };
        let render = |second: &str| {
            let docs = [
                "apiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {name: m1}\nspec: {syncMode: Push}\n".to_owned(),
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: default}\ndata: {a: b}\n".to_owned(),
                deploy("web"),
                deploy("api"),
                policy("web", ""),
                policy("api", second),
            ];
            let mut files = RepoFiles { revision: "r".into(), ..Default::default() };
            files.files.insert("fleet.yaml".into(), docs.join("---\n").into_bytes());
            let plan = crate::plan(&files, &ClusterState::default(), &Limits::default()).unwrap();
            let cm = plan.manifests("m1").map(Result::unwrap).find(|m| m["kind"] == "ConfigMap").unwrap();
            let annotations = cm["metadata"]["annotations"].clone();
            (annotations[super::CONFLICT_ANNOTATION].clone(), annotations[super::PRESERVE_ANNOTATION].clone())
        };
        assert_eq!(render(""), ("abort".into(), serde_json::Value::Null));
        let either = render("  conflictResolution: Overwrite\n  preserveResourcesOnDeletion: true\n");
        assert_eq!(either, ("overwrite".into(), "true".into()));
    }
}
