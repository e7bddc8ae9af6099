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
    /// The API group: the part of `apiVersion` before the slash, empty for the core group.
    pub fn group(&self) -> &str {
        self.api_version.rsplit_once('/').map_or("", |(group, _)| group)
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
