//! Karmada's own objects: parsed into their typed spec, defaulted and validated, and
//! named, with the metadata every one of them shares.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::split::Chunk;
use super::{LoadError, parse_as, validate};
use crate::model::names::NameRule;
use crate::model::{Limits, Named, Origin};

/// Shape shared by every Karmada object.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TypedDoc<S> {
    #[serde(rename = "apiVersion")]
    _api_version: String,
    #[serde(rename = "kind")]
    _kind: String,
    metadata: Metadata,
    spec: S,
    #[serde(default, rename = "status")]
    _status: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Metadata {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

/// A document as text and as the tree already read from it.
#[derive(Clone, Copy)]
pub(super) struct Source<'a> {
    pub chunk: &'a Chunk<'a>,
    pub tree: &'a Value,
}

impl Source<'_> {
    /// The typed document, read from the tree; serde-saphyr reads the text again when
    /// the tree does not fit, so what a typed object accepts, and every error with its
    /// line, stays serde-saphyr's. (The tree never coerces: `yes` read into a string
    /// field, or `1.10` into a label value, is an error here and text to serde-saphyr.)
    ///
    /// A field set to null (`overrideRules:` followed by nothing, or only a comment) is
    /// dropped first, as the API server drops null fields of a custom resource that are
    /// not nullable: Karmada's kinds are custom resources, and a null is "not set". A
    /// document with nulls that still does not fit is refused with what the tree says
    /// (serde-saphyr would stop at the null, which is not the mistake).
    fn read<T: DeserializeOwned>(self, file: &str, limits: &Limits, origin: &Origin) -> Result<T, LoadError> {
        let Some(pruned) = without_nulls(self.tree) else {
            return T::deserialize(self.tree).or_else(|_| parse_as(file, self.chunk, limits));
        };
        T::deserialize(&pruned).or_else(|e| match parse_as::<T>(file, self.chunk, limits) {
            Ok(read) => Ok(read),
            Err(_) => Err(LoadError::Invalid { origin: origin.clone(), message: e.to_string() }),
        })
    }
}

/// The tree without the null values of its mappings (at any depth; sequence items are
/// kept as they are), or `None` when it has none.
fn without_nulls(tree: &Value) -> Option<Value> {
    fn has_null(v: &Value) -> bool {
        match v {
            Value::Object(map) => map.values().any(|v| v.is_null() || has_null(v)),
            Value::Array(items) => items.iter().any(has_null),
            _ => false,
        }
    }
    fn prune(v: &Value) -> Value {
        match v {
            Value::Object(map) => {
                Value::Object(map.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), prune(v))).collect())
            }
            Value::Array(items) => Value::Array(items.iter().map(prune).collect()),
            other => other.clone(),
        }
    }
    has_null(tree).then(|| prune(tree))
}

/// Parses a Karmada object into its typed spec, applies Karmada's defaulting and
/// validation (`check`), and names it. `namespaced` objects default to `default`.
pub(super) fn typed<S: DeserializeOwned>(
    file: &str,
    source: Source<'_>,
    limits: &Limits,
    origin: &Origin,
    namespaced: bool,
    check: fn(&mut S, Option<&str>) -> Result<(), String>,
) -> Result<Named<S>, LoadError> {
    typed_with_labels(file, source, limits, origin, namespaced, check).map(|(named, _)| named)
}

/// [`typed`], also returning `metadata.labels`.
pub(super) fn typed_with_labels<S: DeserializeOwned>(
    file: &str,
    source: Source<'_>,
    limits: &Limits,
    origin: &Origin,
    namespaced: bool,
    check: fn(&mut S, Option<&str>) -> Result<(), String>,
) -> Result<(Named<S>, BTreeMap<String, String>), LoadError> {
    let invalid = |message: String| LoadError::Invalid { origin: origin.clone(), message };
    let doc: TypedDoc<S> = source.read(file, limits, origin)?;
    // Karmada objects are never applied to a member, and Karmada's own tests name them in
    // camelCase (`overridePolicy3`), which order-sensitive rules compare: only a path
    // segment is required, so a name can still key the parse cache and state.
    validate::name(NameRule::PathSegment, &doc.metadata.name).map_err(|m| invalid(format!("metadata.name: {m}")))?;
    let namespace = match (namespaced, doc.metadata.namespace) {
        (true, ns) => {
            let ns = ns.filter(|ns| !ns.is_empty()).unwrap_or_else(|| "default".to_owned());
            validate::namespace(&ns).map_err(|m| invalid(format!("metadata.namespace: {m}")))?;
            Some(ns)
        }
        (false, Some(ns)) if !ns.is_empty() => {
            return Err(invalid(format!("a cluster-scoped object cannot have metadata.namespace ({ns})")));
        }
        (false, _) => None,
    };
    let mut spec = doc.spec;
    check(&mut spec, namespace.as_deref()).map_err(invalid)?;
    Ok((Named { namespace, name: doc.metadata.name, spec, origin: origin.clone() }, doc.metadata.labels))
}

#[cfg(test)]
mod tests {
    use crate::load::load;
    use crate::model::{Limits, RepoFiles};

    fn loaded(policy: &str) -> Result<crate::model::Loaded, crate::load::LoadError> {
        let mut repo = RepoFiles::default();
        repo.files.insert("policy.yaml".into(), policy.as_bytes().to_vec());
        load(&repo, &Limits::default())
    }

    /// A field written as null is not set, in every Karmada kind, as Karmada's API server
    /// drops it; a document whose nulls hide another mistake is still refused.
    #[test]
    fn null_optional_fields_of_karmada_kinds_are_not_set() {
        let docs = [
            "apiVersion: policy.karmada.io/v1alpha1\nkind: OverridePolicy\nmetadata: {name: o}\nspec:\n  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  overrideRules:\n    # none yet\n",
            "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: p, labels: ~}\nspec:\n  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  placement:\n",
            "apiVersion: policy.karmada.io/v1alpha1\nkind: ClusterPropagationPolicy\nmetadata: {name: c}\nspec:\n  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  placement:\n    clusterTolerations: null\n    replicaScheduling: null\n",
        ];
        let read = loaded(&docs.join("---\n")).unwrap();
        assert!(read.override_policies[0].spec.override_rules.is_empty());
        assert_eq!(read.propagation_policies.len(), 2);
        let hidden = docs[1].replace("  placement:\n", "  placement:\n  priority: high\n");
        let err = loaded(&hidden).unwrap_err().to_string();
        assert!(err.contains("policy.yaml: document 1") && err.contains("invalid type"), "{err}");
    }

    #[test]
    fn a_typed_object_reads_as_serde_saphyr_reads_its_text() {
        // In the tree `1.10` is a number and `yes` a boolean; label values are text, so
        // the tree does not fit and serde-saphyr reads them as written.
        let policy = "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: p}\nspec:\n  resourceSelectors:\n  - apiVersion: v1\n    kind: ConfigMap\n    labelSelector:\n      matchLabels: {version: 1.10, enabled: yes}\n";
        let read = loaded(policy).unwrap();
        let selector = read.propagation_policies[0].spec.resource_selectors[0].label_selector.as_ref().unwrap();
        assert_eq!(selector.match_labels["version"], "1.10");
        assert_eq!(selector.match_labels["enabled"], "yes");
        // And errors keep serde-saphyr's line.
        let err = loaded(&policy.replace("kind: ConfigMap\n", "kind: ConfigMap\n    bogus: 1\n")).unwrap_err();
        assert!(err.to_string().contains("policy.yaml: document 1") && err.to_string().contains("line 8"), "{err}");
    }
}
