//! Karmada's own kinds, read into their typed specs and validated.

use super::*;

/// A Karmada object flotilla reads into its typed spec, by apiVersion and kind; `None`
/// for any other kind.
pub(super) fn object(
    api_version: &str,
    kind: &str,
    file: &str,
    source: Source<'_>,
    limits: &Limits,
    origin: &Origin,
) -> Result<Option<Parsed>, LoadError> {
    let doc = Doc { file, source, limits, origin };
    let parsed = match (api_version, kind) {
        ("policy.karmada.io/v1alpha1", "PropagationPolicy") => {
            Parsed::Propagation(doc.read(true, validate::propagation)?)
        }
        ("policy.karmada.io/v1alpha1", "ClusterPropagationPolicy") => {
            Parsed::Propagation(doc.read(false, validate::propagation)?)
        }
        ("policy.karmada.io/v1alpha1", "OverridePolicy") => Parsed::Override(doc.read(true, validate::overrides)?),
        ("policy.karmada.io/v1alpha1", "ClusterOverridePolicy") => {
            Parsed::Override(doc.read(false, validate::overrides)?)
        }
        ("policy.karmada.io/v1alpha1", "ClusterTaintPolicy") => {
            Parsed::ClusterTaintPolicy(doc.read(false, validate::cluster_taint_policy)?)
        }
        ("cluster.karmada.io/v1alpha1", "Cluster") => {
            let (named, labels) =
                typed_with_labels::<ClusterSpec>(file, source, limits, origin, false, validate::cluster)?;
            validate::cluster_name(&named.name)
                .map_err(|message| LoadError::Invalid { origin: origin.clone(), message })?;
            Parsed::Cluster(Box::new(Cluster { name: named.name, labels, spec: named.spec, origin: origin.clone() }))
        }
        ("autoscaling.karmada.io/v1alpha1", "FederatedHPA") => {
            Parsed::FederatedHpa(doc.read(true, validate::federated_hpa)?)
        }
        ("autoscaling.karmada.io/v1alpha1", "CronFederatedHPA") => {
            Parsed::CronFederatedHpa(doc.read(true, validate::cron_federated_hpa)?)
        }
        ("networking.karmada.io/v1alpha1", "MultiClusterService") => {
            Parsed::MultiClusterService(doc.read(true, validate::multi_cluster_service)?)
        }
        _ => return Ok(None),
    };
    Ok(Some(parsed))
}

/// One document being read as a Karmada kind.
struct Doc<'a> {
    file: &'a str,
    source: Source<'a>,
    limits: &'a Limits,
    origin: &'a Origin,
}

impl Doc<'_> {
    /// The document as a `Named<S>`, checked by `check` (`namespaced`: whether the kind
    /// is namespaced).
    fn read<S: serde::de::DeserializeOwned>(
        &self,
        namespaced: bool,
        check: fn(&mut S, Option<&str>) -> Result<(), String>,
    ) -> Result<Arc<Named<S>>, LoadError> {
        typed(self.file, self.source, self.limits, self.origin, namespaced, check).map(Arc::new)
    }
}
