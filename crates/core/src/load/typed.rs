//! Karmada's own objects: parsed into their typed spec, defaulted and validated, and
//! named, with the metadata every one of them shares.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::DeserializeOwned;

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

/// Parses a Karmada object into its typed spec, applies Karmada's defaulting and
/// validation (`check`), and names it. `namespaced` objects default to `default`.
pub(super) fn typed<S: DeserializeOwned>(
    file: &str,
    chunk: &Chunk<'_>,
    limits: &Limits,
    origin: &Origin,
    namespaced: bool,
    check: fn(&mut S, Option<&str>) -> Result<(), String>,
) -> Result<Named<S>, LoadError> {
    typed_with_labels(file, chunk, limits, origin, namespaced, check).map(|(named, _)| named)
}

/// [`typed`], also returning `metadata.labels`.
pub(super) fn typed_with_labels<S: DeserializeOwned>(
    file: &str,
    chunk: &Chunk<'_>,
    limits: &Limits,
    origin: &Origin,
    namespaced: bool,
    check: fn(&mut S, Option<&str>) -> Result<(), String>,
) -> Result<(Named<S>, BTreeMap<String, String>), LoadError> {
    let invalid = |message: String| LoadError::Invalid { origin: origin.clone(), message };
    let doc: TypedDoc<S> = parse_as(file, chunk, limits)?;
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
