//! Resource templates: any Kubernetes object in the repo that is not a Karmada policy.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::body::Body;
use super::selector::Labels;
use crate::schedule::Workload;

/// Identity of an object: what the output is sorted by (apiVersion, kind, namespace, name).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectKey {
    /// `apiVersion`, compared as a string (no version conversion, as Karmada does).
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.namespace`; `None` for cluster-scoped objects.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
}

impl ObjectKey {
    /// A key from its parts (`namespace: None` for cluster-scoped objects).
    pub fn new(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Self {
        ObjectKey {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.map(Into::into),
            name: name.into(),
        }
    }

    /// The API group: the part of `apiVersion` before the slash, empty for the core group.
    pub fn group(&self) -> &str {
        api_group(&self.api_version)
    }

    /// The one text spelling of a key, wherever a key is stored or looked up (inventory
    /// lines, placement and replica state, autoscaler ids): `apiVersion/kind/namespace/name`,
    /// the namespace empty for cluster-scoped objects (`apps/v1/Deployment/web/nginx`,
    /// `v1/Namespace//web`). [`str::parse`] reads it back. `Display` is for people.
    pub fn spelled(&self) -> String {
        format!("{}/{}/{}/{}", self.api_version, self.kind, self.namespace.as_deref().unwrap_or(""), self.name)
    }
}

/// The API group of an `apiVersion`: the part before the slash, empty for the core group.
pub fn api_group(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

/// A string that is not a [`ObjectKey::spelled`] key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an object key (apiVersion/kind/namespace/name)")]
pub struct KeyError(pub String);

impl std::str::FromStr for ObjectKey {
    type Err = KeyError;

    /// Parses [`ObjectKey::spelled`] from the right: kind, namespace and name never
    /// contain `/`, and `apiVersion` has one at most.
    fn from_str(text: &str) -> Result<Self, KeyError> {
        let fail = || KeyError(text.to_owned());
        let mut parts = text.rsplitn(4, '/');
        let (name, namespace, kind, api_version) = (
            parts.next().ok_or_else(fail)?,
            parts.next().ok_or_else(fail)?,
            parts.next().ok_or_else(fail)?,
            parts.next().ok_or_else(fail)?,
        );
        let blank = |s: &str| s.is_empty() || s.contains(char::is_whitespace);
        if blank(name) || blank(kind) || blank(api_version) || api_version.matches('/').count() > 1 {
            return Err(fail());
        }
        Ok(Self {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: (!namespace.is_empty()).then(|| namespace.to_owned()),
            name: name.into(),
        })
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {} {}/{}", self.api_version, self.kind, ns, self.name),
            None => write!(f, "{} {} {}", self.api_version, self.kind, self.name),
        }
    }
}

/// Where a document came from: repo-relative file, 1-based document index and start line.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Origin {
    /// Repo-relative path with `/` separators, shared by every document of the file.
    pub file: Arc<str>,
    /// 1-based index of the document within the file.
    pub document: usize,
    /// 1-based line where the document starts.
    pub line: usize,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: document {} (line {})", self.file, self.document, self.line)
    }
}

/// A resource template: the user's manifest, kept as an opaque JSON object so the API
/// server does the typing, as Kubernetes does with what `kubectl apply` sends.
#[derive(Debug, Clone)]
pub struct Template {
    /// Identity; the namespace is already defaulted for namespaced kinds.
    pub key: ObjectKey,
    /// `metadata.labels`, extracted once for selector matching; shared with the parse
    /// cache.
    pub labels: Labels,
    /// The whole object as written, compact; [`Template::object`] gives it with its
    /// namespace defaulted. Shared with the parse cache.
    pub body: Body,
    /// Where it was declared.
    pub origin: Origin,
    /// Set for objects flotilla derives from another template (the `derived-<name>`
    /// Service of a ServiceImport): they travel with their source and are never claimed.
    pub derived_from: Option<ObjectKey>,
    /// What placement and dependency propagation read, taken from the object once.
    pub facts: Arc<Facts>,
}

/// What the pipeline reads from a template's object on every render, taken out once when
/// the object is parsed so that the object itself can stay compact.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Facts {
    /// Replicas and requests, for placement.
    pub workload: Workload,
    /// `metadata.uid`, if written; Karmada's replica tie-break hashes it.
    pub uid: Option<Box<str>>,
    /// Objects the pod spec names (kind, name), in the template's namespace: what
    /// `propagateDeps` carries along.
    pub references: Vec<(&'static str, Box<str>)>,
    /// What a customization's `GetDependencies` names, any kind and namespace.
    pub interpreted: Vec<ObjectKey>,
    /// The template's `work.karmada.io/conflict-resolution` annotation, as written
    /// (`render::conflict_resolution` reads it).
    pub conflict_resolution: Option<Box<str>>,
}

impl Facts {
    /// The facts of an object of `apiVersion` and `kind`.
    pub fn of(api_version: &str, kind: &str, object: &Value) -> Self {
        let group = api_group(api_version);
        Facts {
            workload: crate::schedule::workload_of(group, kind, object),
            uid: object.pointer("/metadata/uid").and_then(Value::as_str).map(Into::into),
            references: crate::dependencies::references(group, kind, object),
            interpreted: Vec::new(),
            conflict_resolution: object
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(crate::render::CONFLICT_ANNOTATION))
                .and_then(Value::as_str)
                .map(Into::into),
        }
    }
}

impl Template {
    /// A template made from a tree (a derived Service, a preview's copy): its facts are
    /// read from `object`, whose namespace should already be the key's.
    pub fn new(key: ObjectKey, labels: Labels, object: &Value, origin: Origin) -> Self {
        let facts = Arc::new(Facts::of(&key.api_version, &key.kind, object));
        Template { key, labels, body: Body::new(object), origin, derived_from: None, facts }
    }

    /// The object as a tree of its own, with `metadata.namespace` the key's: defaulted
    /// for namespaced kinds, absent for cluster-scoped ones.
    pub fn object(&self) -> Value {
        let mut object = self.body.tree();
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            match &self.key.namespace {
                Some(ns) if metadata.get("namespace").and_then(Value::as_str) != Some(ns) => {
                    metadata.insert("namespace".into(), Value::String(ns.clone()));
                }
                Some(_) => {}
                None => {
                    metadata.remove("namespace");
                }
            }
        }
        object
    }

    /// `metadata.uid` if the manifest carries one; Karmada's replica tie-break hashes it.
    pub fn uid(&self) -> &str {
        self.facts.uid.as_deref().unwrap_or("")
    }

    /// Replicas and requests, as placement reads them.
    pub fn workload(&self) -> &Workload {
        &self.facts.workload
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> ObjectKey {
        ObjectKey::new(api_version, kind, namespace, name)
    }

    #[test]
    fn the_spelling_reads_back() {
        for k in [
            key("apps/v1", "Deployment", Some("web"), "nginx.v2"),
            key("v1", "ConfigMap", Some("web"), "c"),
            key("v1", "Namespace", None, "web"),
            key("example.com/v1", "Widget", None, "w"),
        ] {
            assert_eq!(k.spelled().parse::<ObjectKey>(), Ok(k.clone()), "{}", k.spelled());
        }
        assert_eq!(key("v1", "Namespace", None, "web").spelled(), "v1/Namespace//web");
    }

    #[test]
    fn other_text_is_refused() {
        for bad in
            ["", "web", "v1/ConfigMap/c", "a/b/v1/ConfigMap/ns/c", "v1/ConfigMap/ns/", "apps/v1 Deployment web nginx"]
        {
            assert!(bad.parse::<ObjectKey>().is_err(), "{bad:?}");
        }
    }
}
