//! Template identity: which kinds are cluster-scoped, namespace defaulting, and the
//! objects flotilla derives from templates (a ServiceImport's `derived-<name>` Service).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::LoadError;
use crate::model::names::name_rule;
use crate::model::object::api_group;
use crate::model::quota::FederatedResourceQuotaSpec;
use crate::model::selector::Labels;
use crate::model::{Body, Facts, Named, ObjectKey, Origin, Template};

/// Built-in cluster-scoped kinds by (group, kind). Anything else is namespaced unless a
/// CustomResourceDefinition in the repo says `scope: Cluster`.
const CLUSTER_SCOPED: &[(&str, &str)] = &[
    ("", "Namespace"),
    ("", "Node"),
    ("", "PersistentVolume"),
    ("", "ComponentStatus"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apiregistration.k8s.io", "APIService"),
    ("storage.k8s.io", "StorageClass"),
    ("storage.k8s.io", "CSIDriver"),
    ("storage.k8s.io", "CSINode"),
    ("storage.k8s.io", "VolumeAttachment"),
    ("storage.k8s.io", "VolumeAttributesClass"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("networking.k8s.io", "IngressClass"),
    ("networking.k8s.io", "IPAddress"),
    ("networking.k8s.io", "ServiceCIDR"),
    ("node.k8s.io", "RuntimeClass"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding"),
    ("certificates.k8s.io", "CertificateSigningRequest"),
    ("certificates.k8s.io", "ClusterTrustBundle"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
    ("resource.k8s.io", "DeviceClass"),
    ("resource.k8s.io", "ResourceSlice"),
    ("resource.k8s.io", "DeviceTaintRule"),
    ("storagemigration.k8s.io", "StorageVersionMigration"),
    ("internal.apiserver.k8s.io", "StorageVersion"),
];

/// Built-in and well-known namespaced kinds by (group, kind): with [`CLUSTER_SCOPED`],
/// the kinds whose scope flotilla knows without the repository. Under a `--scope`, any
/// other kind needs its CustomResourceDefinition in the repository (or the scope file's
/// word), since a cluster-scoped kind written with a namespace would pass for a
/// namespaced object.
const NAMESPACED: &[(&str, &str)] = &[
    ("", "ConfigMap"),
    ("", "Endpoints"),
    ("", "Event"),
    ("", "LimitRange"),
    ("", "PersistentVolumeClaim"),
    ("", "Pod"),
    ("", "PodTemplate"),
    ("", "ReplicationController"),
    ("", "ResourceQuota"),
    ("", "Secret"),
    ("", "Service"),
    ("", "ServiceAccount"),
    ("apps", "ControllerRevision"),
    ("apps", "DaemonSet"),
    ("apps", "Deployment"),
    ("apps", "ReplicaSet"),
    ("apps", "StatefulSet"),
    ("autoscaling", "HorizontalPodAutoscaler"),
    ("batch", "CronJob"),
    ("batch", "Job"),
    ("coordination.k8s.io", "Lease"),
    ("coordination.k8s.io", "LeaseCandidate"),
    ("discovery.k8s.io", "EndpointSlice"),
    ("events.k8s.io", "Event"),
    ("networking.k8s.io", "Ingress"),
    ("networking.k8s.io", "NetworkPolicy"),
    ("policy", "PodDisruptionBudget"),
    ("rbac.authorization.k8s.io", "Role"),
    ("rbac.authorization.k8s.io", "RoleBinding"),
    ("storage.k8s.io", "CSIStorageCapacity"),
    ("resource.k8s.io", "ResourceClaim"),
    ("resource.k8s.io", "ResourceClaimTemplate"),
    ("multicluster.x-k8s.io", "ServiceExport"),
    ("multicluster.x-k8s.io", "ServiceImport"),
    ("networking.karmada.io", "MultiClusterIngress"),
    ("networking.karmada.io", "MultiClusterService"),
];

/// Whether flotilla knows the scope of `kind` in `group` without the repository.
pub fn is_builtin_kind(group: &str, kind: &str) -> bool {
    CLUSTER_SCOPED.contains(&(group, kind)) || NAMESPACED.contains(&(group, kind))
}

/// The (group, kind) of every kind a CustomResourceDefinition among `templates`
/// declares.
pub fn declared_kinds(templates: &[Arc<Template>]) -> BTreeSet<(String, String)> {
    templates
        .iter()
        .filter(|t| t.key.kind == "CustomResourceDefinition" && t.key.group() == "apiextensions.k8s.io")
        .filter_map(|t| crd_scope(&t.object()))
        .map(|(group, kind, _)| (group, kind))
        .collect()
}

/// Whether an apiVersion belongs to Karmada's own API groups.
pub fn is_karmada_group(api_version: &str) -> bool {
    let group = api_group(api_version);
    group == "karmada.io" || group.ends_with(".karmada.io")
}

/// Cluster-scoped custom kinds declared by CRDs in the repo.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Scopes {
    custom: BTreeMap<(String, String), bool>,
}

impl Scopes {
    /// The scopes declared by the CustomResourceDefinitions among `templates`.
    pub fn from_crds<'a>(templates: impl Iterator<Item = &'a Raw>) -> Self {
        Self {
            custom: templates
                .filter_map(|t| t.crd.clone())
                .map(|(group, kind, cluster)| ((group, kind), cluster))
                .collect(),
        }
    }

    fn is_cluster_scoped(&self, group: &str, kind: &str) -> bool {
        CLUSTER_SCOPED.contains(&(group, kind))
            || self.custom.get(&(group.to_owned(), kind.to_owned())).copied().unwrap_or(false)
    }
}

/// A template as parsed: checked in everything its scope does not decide, kept compact,
/// with its facts taken. Held by the parse cache, and keyed by [`keyed`] once the
/// repository's CRD scopes are known.
#[derive(Debug)]
pub struct Raw {
    api_version: String,
    kind: String,
    name: String,
    /// `metadata.namespace` as written: `Ok(None)` when absent, null or empty, `Err`
    /// with the complaint when it is not a valid namespace (which matters only if the
    /// kind is namespaced).
    namespace: Result<Option<String>, String>,
    labels: Labels,
    body: Body,
    facts: Arc<Facts>,
    /// `(group, kind, cluster-scoped)` when this is a CustomResourceDefinition.
    crd: Option<(String, String, bool)>,
}

/// Checks a template's type and metadata and makes it compact. The tree is dropped here:
/// a template is held as text from now on.
pub fn raw(object: Value, origin: &Origin) -> Result<Raw, LoadError> {
    let invalid = |message: String| LoadError::Invalid { origin: origin.clone(), message };
    let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_owned();
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default().to_owned();
    if api_version.is_empty() || kind.is_empty() {
        return Err(invalid("apiVersion and kind must be non-empty strings".into()));
    }
    let Some(metadata) = object.get("metadata").and_then(Value::as_object) else {
        return Err(invalid("missing metadata".into()));
    };
    let name = match metadata.get("name") {
        Some(Value::String(name)) => name.clone(),
        _ if metadata.contains_key("generateName") => {
            return Err(invalid("metadata.generateName is not supported: GitOps needs a fixed metadata.name".into()));
        }
        Some(Value::Bool(_)) => {
            return Err(invalid(
                "metadata.name must be a string, found a boolean (YAML 1.1, like Kubernetes, reads y/n/yes/no/on/off as booleans; quote the name)".into(),
            ));
        }
        _ => return Err(invalid("metadata.name must be a non-empty string".into())),
    };
    super::validate::type_meta(&api_version, &kind).map_err(invalid)?;
    let group = api_group(&api_version);
    super::validate::name(name_rule(group, &kind), &name).map_err(|m| invalid(format!("metadata.name: {m}")))?;
    let labels = Labels::from(string_map(metadata, "labels").map_err(invalid)?);
    string_map(metadata, "annotations").map_err(invalid)?;
    let namespace = match metadata.get("namespace") {
        Some(Value::String(ns)) if !ns.is_empty() => {
            super::validate::namespace(ns).map(|()| Some(ns.clone())).map_err(|m| format!("metadata.namespace: {m}"))
        }
        None | Some(Value::Null) | Some(Value::String(_)) => Ok(None),
        Some(_) => Err("metadata.namespace must be a string".into()),
    };
    let crd = if kind == "CustomResourceDefinition" { crd_scope(&object) } else { None };
    let facts = Arc::new(Facts::of(&api_version, &kind, &object));
    Ok(Raw { body: Body::new(&object), api_version, kind, name, namespace, labels, facts, crd })
}

/// `spec.group`, `spec.names.kind` and whether `spec.scope` is `Cluster`.
fn crd_scope(crd: &Value) -> Option<(String, String, bool)> {
    let spec = crd.get("spec")?;
    let group = spec.get("group")?.as_str()?.to_owned();
    let kind = spec.pointer("/names/kind")?.as_str()?.to_owned();
    Some((group, kind, spec.get("scope").and_then(Value::as_str) == Some("Cluster")))
}

/// Keys a template under the repository's scopes: defaults the namespace of namespaced
/// kinds to `default` (as `kubectl apply` does) and drops it from cluster-scoped ones
/// ([`Template::object`] writes the key's namespace into the tree it gives).
pub fn keyed(raw: &Raw, origin: Origin, scopes: &Scopes) -> Result<Template, LoadError> {
    let group = api_group(&raw.api_version);
    let namespace = if scopes.is_cluster_scoped(group, &raw.kind) {
        None
    } else {
        let written =
            raw.namespace.clone().map_err(|message| LoadError::Invalid { origin: origin.clone(), message })?;
        Some(written.unwrap_or_else(|| "default".to_owned()))
    };
    let key =
        ObjectKey { api_version: raw.api_version.clone(), kind: raw.kind.clone(), namespace, name: raw.name.clone() };
    Ok(Template {
        key,
        labels: raw.labels.clone(),
        body: raw.body.clone(),
        origin,
        derived_from: None,
        facts: raw.facts.clone(),
    })
}

fn string_map(metadata: &Map<String, Value>, field: &str) -> Result<BTreeMap<String, String>, String> {
    match metadata.get(field) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                _ => Err(format!("metadata.{field}.{k} must be a string")),
            })
            .collect(),
        Some(_) => Err(format!("metadata.{field} must be a map of strings")),
    }
}

/// Karmada's ServiceImport controller creates a ClusterIP Service `derived-<name>` with
/// the ServiceImport's ports; consumers call it, and it follows the ServiceImport to
/// every cluster it is propagated to (spec §7.4). [`follow_exported`] then gives it the
/// exported Service's ports when the repository holds that Service.
pub fn derived_service(template: &Template) -> Option<Template> {
    if template.key.kind != "ServiceImport" || template.key.group() != "multicluster.x-k8s.io" {
        return None;
    }
    let namespace = template.key.namespace.clone()?;
    let name = format!("derived-{}", template.key.name);
    let ports = service_ports(&template.object());
    let object = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"type": "ClusterIP", "ports": ports},
    });
    let key = ObjectKey { api_version: "v1".into(), kind: "Service".into(), namespace: Some(namespace), name };
    let derived = Template::new(key, Default::default(), &object, template.origin.clone());
    Some(Template { derived_from: Some(template.key.clone()), ..derived })
}

/// The ResourceQuota Karmada's static-assignment controller makes of a
/// FederatedResourceQuota in each member it assigns: the same name and namespace, and
/// that member's `hard`, which the render fills in per member
/// ([`crate::model::plan::Source::FederatedResourceQuota`]).
pub fn resource_quota(quota: &Named<FederatedResourceQuotaSpec>) -> Template {
    let namespace = quota.namespace.clone().unwrap_or_else(|| "default".into());
    let object = json!({
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": quota.name, "namespace": namespace},
        "spec": {"hard": {}},
    });
    let key = ObjectKey::new("v1", "ResourceQuota", Some(&namespace), &quota.name);
    let derived = Template::new(key, Default::default(), &object, quota.origin.clone());
    let source = ObjectKey::new(FEDERATED_RESOURCE_QUOTA.0, FEDERATED_RESOURCE_QUOTA.1, Some(&namespace), &quota.name);
    Template { derived_from: Some(source), ..derived }
}

/// The apiVersion and kind of a FederatedResourceQuota.
pub const FEDERATED_RESOURCE_QUOTA: (&str, &str) = ("policy.karmada.io/v1alpha1", "FederatedResourceQuota");

/// The ports a derived Service copies: name, protocol, port and appProtocol of each.
fn service_ports(object: &Value) -> Vec<Value> {
    let allowed: BTreeSet<&str> = ["name", "protocol", "port", "appProtocol"].into();
    object
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(|ports| {
            ports
                .iter()
                .filter_map(Value::as_object)
                .map(|p| {
                    Value::Object(
                        p.iter()
                            .filter(|(k, _)| allowed.contains(k.as_str()))
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Gives each derived Service the ports of the Service its ServiceImport names, when
/// the repository holds that Service: a port changed in Git reaches the consumers with
/// the next render (Karmada copies the ServiceImport's ports once and never follows the
/// exported Service, karmada#1993). `templates` is sorted by key.
pub fn follow_exported(templates: &mut [Arc<Template>]) {
    let find = |templates: &[Arc<Template>], key: &ObjectKey| templates.binary_search_by(|t| t.key.cmp(key)).ok();
    for i in 0..templates.len() {
        let Some(import) = templates[i].derived_from.as_ref() else { continue };
        let exported = ObjectKey { api_version: "v1".into(), kind: "Service".into(), ..import.clone() };
        let Some(source) = find(templates, &exported) else { continue };
        let ports = service_ports(&templates[source].object());
        let mut object = templates[i].object();
        object["spec"]["ports"] = Value::Array(ports);
        templates[i] = Arc::new(Template { body: Body::new(&object), ..Template::clone(&templates[i]) });
    }
}
