//! Resource templates: any Kubernetes object in the repo that is not a Karmada policy.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

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
        self.api_version.rsplit_once('/').map_or("", |(group, _)| group)
    }

    /// The one text spelling of a key, wherever a key is stored or looked up (inventory
    /// lines, placement and replica state, autoscaler ids): `apiVersion/kind/namespace/name`,
    /// the namespace empty for cluster-scoped objects (`apps/v1/Deployment/web/nginx`,
    /// `v1/Namespace//web`). [`str::parse`] reads it back. `Display` is for people.
    pub fn spelled(&self) -> String {
        format!("{}/{}/{}/{}", self.api_version, self.kind, self.namespace.as_deref().unwrap_or(""), self.name)
    }
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

/// A resource template: the user's manifest, kept as an opaque JSON tree so the API
/// server does the typing, as Kubernetes does with what `kubectl apply` sends.
#[derive(Debug, Clone)]
pub struct Template {
    /// Identity; the namespace is already defaulted for namespaced kinds.
    pub key: ObjectKey,
    /// `metadata.labels`, extracted once for selector matching.
    pub labels: BTreeMap<String, String>,
    /// The whole object as written (namespace defaulted); shared with the parse cache.
    pub object: Arc<Value>,
    /// Where it was declared.
    pub origin: Origin,
    /// Set for objects flotilla derives from another template (the `derived-<name>`
    /// Service of a ServiceImport): they travel with their source and are never claimed.
    pub derived_from: Option<ObjectKey>,
    /// What placement reads from the object, worked out on first use; templates are
    /// shared between revisions by the parse cache, and so is this.
    pub workload: std::sync::OnceLock<crate::schedule::Workload>,
}

impl Template {
    /// `metadata.uid` if the manifest carries one; Karmada's replica tie-break hashes it.
    pub fn uid(&self) -> &str {
        self.object.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("")
    }

    /// An annotation of the template.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.object.get("metadata")?.get("annotations")?.get(key)?.as_str()
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
