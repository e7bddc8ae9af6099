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
    fn read<T: DeserializeOwned>(self, file: &str, limits: &Limits) -> Result<T, LoadError> {
        T::deserialize(self.tree).or_else(|_| parse_as(file, self.chunk, limits))
    }
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
    let doc: TypedDoc<S> = source.read(file, limits)?;
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
