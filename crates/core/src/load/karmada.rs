//! Karmada's own kinds, and flotilla's policy kinds beside them, read into their typed
//! specs and validated.

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
        ("policy.karmada.io/v1alpha1", "FederatedResourceQuota") => {
            Parsed::FederatedResourceQuota(doc.read(true, validate::federated_resource_quota)?)
        }
        ("config.karmada.io/v1alpha1", "ResourceInterpreterCustomization") => {
            Parsed::Customization(doc.read(false, validate::customization)?)
        }
        // flotilla's own policy kinds, read as Karmada's are.
        ("flotilla.dev/v1alpha1", "RolloutPolicy") => Parsed::Rollout(doc.read(true, validate::rollout)?),
        ("flotilla.dev/v1alpha1", "ClusterRolloutPolicy") => Parsed::Rollout(doc.read(false, validate::rollout)?),
        ("flotilla.dev/v1alpha1", "HelmChart") => Parsed::HelmChart(doc.read(true, validate::helm_chart)?),
        _ => return Ok(None),
    };
    Ok(Some(parsed))
}

/// What flotilla does not do with a Karmada kind it accepts without acting on it (any
/// version of its group); `None` for a kind it does not know at all (a typo stays an
/// error). docs/karmada-compat.md lists every Karmada kind and what flotilla does with it.
pub(super) fn not_acted_on(api_version: &str, kind: &str) -> Option<&'static str> {
    let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
    Some(match (group, kind) {
        ("apps.karmada.io", "WorkloadRebalancer") => {
            "not acted on: every render places workloads afresh from Git, so there is no earlier decision to rebalance; change the policy or its weights to move replicas"
        }
        ("config.karmada.io", "ResourceInterpreterCustomization") => {
            "not read: only config.karmada.io/v1alpha1 is; objects of its target kind are interpreted by the shipped or native rules"
        }
        ("config.karmada.io", "ResourceInterpreterWebhookConfiguration") => {
            "not called: interpreter webhooks need Karmada's control plane; objects of their kinds are copied whole"
        }
        ("search.karmada.io", "ResourceRegistry") => {
            "not acted on: flotilla keeps no searchable cache of member objects"
        }
        ("policy.karmada.io", "FederatedResourceQuota") => {
            "not read: only policy.karmada.io/v1alpha1 is; no ResourceQuota is made from it"
        }
        ("networking.karmada.io", "MultiClusterIngress") => "not acted on: no ingress is programmed across members",
        ("remedy.karmada.io", "Remedy") => "not acted on: cluster conditions do not trigger remedies",
        ("work.karmada.io", "ResourceBinding" | "ClusterResourceBinding" | "Work") => {
            "not read: Karmada writes these itself; flotilla renders placements from the policies"
        }
        _ => return None,
    })
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
