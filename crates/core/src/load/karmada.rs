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
    let parsed = match (api_version, kind) {
        ("policy.karmada.io/v1alpha1", "PropagationPolicy") => {
            Parsed::Propagation(Arc::new(typed(file, source, limits, origin, true, validate::propagation)?))
        }
        ("policy.karmada.io/v1alpha1", "ClusterPropagationPolicy") => {
            Parsed::Propagation(Arc::new(typed(file, source, limits, origin, false, validate::propagation)?))
        }
        ("policy.karmada.io/v1alpha1", "OverridePolicy") => {
            Parsed::Override(Arc::new(typed(file, source, limits, origin, true, validate::overrides)?))
        }
        ("policy.karmada.io/v1alpha1", "ClusterOverridePolicy") => {
            Parsed::Override(Arc::new(typed(file, source, limits, origin, false, validate::overrides)?))
        }
        ("policy.karmada.io/v1alpha1", "ClusterTaintPolicy") => Parsed::ClusterTaintPolicy(Arc::new(typed(
            file,
            source,
            limits,
            origin,
            false,
            validate::cluster_taint_policy,
        )?)),
        ("cluster.karmada.io/v1alpha1", "Cluster") => {
            let (named, labels) =
                typed_with_labels::<ClusterSpec>(file, source, limits, origin, false, validate::cluster)?;
            validate::cluster_name(&named.name)
                .map_err(|message| LoadError::Invalid { origin: origin.clone(), message })?;
            Parsed::Cluster(Box::new(Cluster { name: named.name, labels, spec: named.spec, origin: origin.clone() }))
        }
        ("autoscaling.karmada.io/v1alpha1", "FederatedHPA") => {
            Parsed::FederatedHpa(Arc::new(typed(file, source, limits, origin, true, validate::federated_hpa)?))
        }
        ("autoscaling.karmada.io/v1alpha1", "CronFederatedHPA") => {
            Parsed::CronFederatedHpa(Arc::new(typed(file, source, limits, origin, true, validate::cron_federated_hpa)?))
        }
        ("networking.karmada.io/v1alpha1", "MultiClusterService") => Parsed::MultiClusterService(Arc::new(typed(
            file,
            source,
            limits,
            origin,
            true,
            validate::multi_cluster_service,
        )?)),
        _ => return Ok(None),
    };
    Ok(Some(parsed))
}
