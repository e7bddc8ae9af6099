//! Stage 2, `bind`: which policy claims each template (spec §2).
//!
//! | selector has           | template                      | level              |
//! |------------------------|-------------------------------|--------------------|
//! | other apiVersion/kind/ns | —                           | `Mismatch`         |
//! | `name`                 | same name                     | `Name`             |
//! | `name`                 | other name                    | `Mismatch`         |
//! | no name, no selector   | —                             | `All`              |
//! | `labelSelector`        | labels match (selector valid) | `LabelSelector`    |
//!
//! A policy's level is the maximum over its selectors. Among policies the winner has
//! the highest explicit priority, then the highest level, then the smallest name. A
//! namespaced PropagationPolicy in the template's namespace always beats every
//! ClusterPropagationPolicy. Like Karmada's namespace sync, every Namespace template
//! goes to all clusters; one labelled `namespace.karmada.io/skip-auto-propagation:
//! "true"` goes where a ClusterPropagationPolicy places it, as Karmada's detector
//! matches it (the placement `karmadactl promote namespace` writes). `default`,
//! `kube-*` and `karmada-*` are never claimed (Karmada's detector would: a deliberate
//! difference, so no inventory ever holds, and could prune, a system namespace).

use std::cmp::Reverse;
use std::collections::BTreeMap;

use rayon::prelude::*;

use crate::model::policy::ResourceSelector;
use crate::model::selector::{LabelLookup, Labels};
use crate::model::{Loaded, ObjectKey, Template};

/// How specifically a selector matches a template (Karmada's implicit priority).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MatchLevel {
    /// Does not select the template.
    Mismatch = 0,
    /// apiVersion and kind only.
    All = 1,
    /// By label selector.
    LabelSelector = 2,
    /// By name.
    Name = 3,
}

/// Who claimed a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// A (Cluster)PropagationPolicy, by index into [`Loaded::propagation_policies`].
    Policy(usize),
    /// A Namespace, synced to every cluster as Karmada's namespace controller does.
    NamespaceSync,
    /// A Service a CrossCluster MultiClusterService of the same name claims (index into
    /// [`Loaded::multi_cluster_services`]); it wins over any PropagationPolicy, as
    /// Karmada's MultiClusterService controller takes the Service's binding over.
    MultiClusterService(usize),
    /// The ResourceQuota a FederatedResourceQuota derives (index into
    /// [`Loaded::federated_resource_quotas`]), placed on the members it assigns.
    FederatedResourceQuota(usize),
}

/// A template and the policy that claimed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binding {
    /// Index into [`Loaded::templates`].
    pub template: usize,
    /// The claim.
    pub claim: Claim,
}

/// Label that hands a template to another controller (e.g. a MultiClusterService).
const CLAIMED_BY: &str = "resourcetemplate.karmada.io/claimed-by";
/// Label that keeps a Namespace out of the automatic namespace sync.
const SKIP_NAMESPACE_SYNC: &str = "namespace.karmada.io/skip-auto-propagation";

/// The level of one selector for one template.
pub fn selector_level(selector: &ResourceSelector, key: &ObjectKey, labels: &impl LabelLookup) -> MatchLevel {
    if selector.api_version != key.api_version
        || selector.kind != key.kind
        || selector.namespace.as_ref().is_some_and(|ns| key.namespace.as_ref() != Some(ns))
    {
        return MatchLevel::Mismatch;
    }
    match (&selector.name, &selector.label_selector) {
        (Some(name), _) if *name == key.name => MatchLevel::Name,
        (Some(_), _) => MatchLevel::Mismatch,
        (None, None) => MatchLevel::All,
        (None, Some(sel)) if sel.matches(labels) => MatchLevel::LabelSelector,
        (None, Some(_)) => MatchLevel::Mismatch,
    }
}

/// A policy's level: the best of its selectors.
pub fn policy_level(selectors: &[ResourceSelector], key: &ObjectKey, labels: &impl LabelLookup) -> MatchLevel {
    selectors.iter().map(|s| selector_level(s, key, labels)).max().unwrap_or(MatchLevel::Mismatch)
}

/// A policy as matching sees it.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    /// `metadata.name`.
    pub name: &'a str,
    /// Explicit priority (nil is 0).
    pub priority: Option<i32>,
    /// Resource selectors (namespace already defaulted).
    pub selectors: &'a [ResourceSelector],
}

/// Index of the winning candidate for a template, if any matches.
pub fn best_policy<'a>(
    candidates: impl IntoIterator<Item = Candidate<'a>>,
    key: &ObjectKey,
    labels: &impl LabelLookup,
) -> Option<usize> {
    candidates
        .into_iter()
        .enumerate()
        .map(|(i, c)| (i, c, policy_level(c.selectors, key, labels)))
        .filter(|(_, _, level)| *level != MatchLevel::Mismatch)
        .max_by_key(|(_, c, level)| (c.priority.unwrap_or(0), *level, Reverse(c.name)))
        .map(|(i, _, _)| i)
}

/// Policies indexed by what their selectors require, so a template is compared only
/// with policies that could select it, which keeps matching linear in the number of
/// templates. Every selector is filed under its scope (the policy's namespace, or `None`
/// for a cluster-scoped policy), apiVersion and kind, and further by what it requires:
/// a `name`, else one `matchLabels` pair (a necessary condition), else nothing.
#[derive(Debug, Default)]
pub struct PolicyIndex<'a> {
    by_name: BTreeMap<(Scope<'a>, &'a str, &'a str, &'a str), Vec<usize>>,
    by_label: BTreeMap<(Scope<'a>, &'a str, &'a str, &'a str, &'a str), Vec<usize>>,
    by_kind: BTreeMap<(Scope<'a>, &'a str, &'a str), Vec<usize>>,
    /// Policies without selectors (override policies: everything in scope).
    everything: BTreeMap<Scope<'a>, Vec<usize>>,
}

/// A policy's namespace, or `None` for cluster-scoped policies.
type Scope<'a> = Option<&'a str>;

impl<'a> PolicyIndex<'a> {
    /// Indexes `(policy index, scope, selectors)` triples.
    pub fn new(policies: impl IntoIterator<Item = (usize, Scope<'a>, &'a [ResourceSelector])>) -> Self {
        let mut index = Self::default();
        for (i, scope, selectors) in policies {
            if selectors.is_empty() {
                index.everything.entry(scope).or_default().push(i);
            }
            for s in selectors {
                let (api, kind) = (s.api_version.as_str(), s.kind.as_str());
                let first_label = s.label_selector.as_ref().and_then(|l| l.match_labels.iter().next());
                let entry = match (&s.name, first_label) {
                    (Some(name), _) => index.by_name.entry((scope, api, kind, name.as_str())).or_default(),
                    (None, Some((k, v))) => {
                        index.by_label.entry((scope, api, kind, k.as_str(), v.as_str())).or_default()
                    }
                    (None, None) => index.by_kind.entry((scope, api, kind)).or_default(),
                };
                if entry.last() != Some(&i) {
                    entry.push(i);
                }
            }
        }
        index
    }

    /// Policies of `scope` that may select this template, ascending.
    pub fn candidates(&self, scope: Scope<'_>, key: &ObjectKey, labels: &Labels) -> Vec<usize> {
        let (api, kind) = (key.api_version.as_str(), key.kind.as_str());
        let mut out: Vec<usize> = Vec::new();
        out.extend(self.by_name.get(&(scope, api, kind, key.name.as_str())).into_iter().flatten());
        out.extend(self.by_kind.get(&(scope, api, kind)).into_iter().flatten());
        out.extend(self.everything.get(&scope).into_iter().flatten());
        for (k, v) in labels.iter() {
            out.extend(self.by_label.get(&(scope, api, kind, k, v)).into_iter().flatten());
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// Binds every claimable template to its policy. Unclaimed templates are returned
/// separately so callers can warn about them.
pub fn bind(loaded: &Loaded) -> (Vec<Binding>, Vec<usize>) {
    let index = PolicyIndex::new(
        loaded
            .propagation_policies
            .iter()
            .enumerate()
            .map(|(i, p)| (i, p.namespace.as_deref(), p.spec.resource_selectors.as_slice())),
    );
    let services = multi_cluster_services(loaded);
    let quotas: BTreeMap<(Option<&str>, &str), usize> = loaded
        .federated_resource_quotas
        .iter()
        .enumerate()
        .map(|(i, q)| ((q.namespace.as_deref(), q.name.as_str()), i))
        .collect();
    let quota_of = |template: &Template| {
        let source = template.derived_from.as_ref()?;
        let kind = (source.api_version.as_str(), source.kind.as_str());
        (kind == crate::load::FEDERATED_RESOURCE_QUOTA)
            .then(|| quotas.get(&(source.namespace.as_deref(), source.name.as_str())).copied())
            .flatten()
    };
    // One outcome per template (an exact-size collect): claimed, unclaimed, or not
    // claimable (`None`).
    let claims: Vec<Option<Option<Claim>>> = loaded
        .templates
        .par_iter()
        .map(|template| {
            if let Some(q) = quota_of(template) {
                return Some(Some(Claim::FederatedResourceQuota(q)));
            }
            match multi_cluster_service(&services, template) {
                Some(m) => Some(Some(Claim::MultiClusterService(m))),
                None => claimable(template).then(|| claim(loaded, &index, template)),
            }
        })
        .collect();
    let mut bindings = Vec::with_capacity(claims.len());
    let mut unclaimed = Vec::new();
    for (template, claim) in claims.into_iter().enumerate() {
        match claim {
            Some(Some(claim)) => bindings.push(Binding { template, claim }),
            Some(None) => unclaimed.push(template),
            None => {}
        }
    }
    (bindings, unclaimed)
}

/// CrossCluster MultiClusterServices by the namespace and name of the Service they claim.
fn multi_cluster_services(loaded: &Loaded) -> BTreeMap<(&str, &str), usize> {
    let mut out = BTreeMap::new();
    for (i, mcs) in loaded.multi_cluster_services.iter().enumerate().filter(|(_, m)| m.spec.cross_cluster()) {
        out.insert((mcs.namespace.as_deref().unwrap_or("default"), mcs.name.as_str()), i);
    }
    out
}

/// The MultiClusterService that claims `template`, if it is a Service one claims.
fn multi_cluster_service(services: &BTreeMap<(&str, &str), usize>, template: &Template) -> Option<usize> {
    let key = &template.key;
    if key.api_version != "v1" || key.kind != "Service" || template.derived_from.is_some() {
        return None;
    }
    services.get(&(key.namespace.as_deref()?, key.name.as_str())).copied()
}

fn claim(loaded: &Loaded, index: &PolicyIndex<'_>, template: &Template) -> Option<Claim> {
    if template.key.api_version == "v1" && template.key.kind == "Namespace" {
        if namespace_synced(template) {
            return Some(Claim::NamespaceSync);
        }
        if system_namespace(&template.key.name) {
            // Never claimed: an inventory holding `kube-system` could one day prune it.
            return None;
        }
    }
    let policies = &loaded.propagation_policies;
    claiming(index, template, |i| Candidate {
        name: &policies[i].name,
        priority: policies[i].spec.priority,
        selectors: &policies[i].spec.resource_selectors,
    })
    .map(Claim::Policy)
}

/// The policy of `index` that claims `template`, as Karmada's detector picks one: a
/// policy of the template's namespace before a cluster-wide one (never for a reserved
/// namespace), then by priority, how closely it selects, and name.
pub fn claiming<'a>(
    index: &PolicyIndex<'_>,
    template: &Template,
    policy: impl Fn(usize) -> Candidate<'a>,
) -> Option<usize> {
    let pick = |scope: Option<&str>| {
        let indices = index.candidates(scope, &template.key, &template.labels);
        let candidates = indices.iter().map(|&i| policy(i));
        best_policy(candidates, &template.key, &template.labels).map(|winner| indices[winner])
    };
    let namespaced = template.key.namespace.as_deref().and_then(|ns| pick(Some(ns)));
    let cluster_wide = || {
        if template.key.namespace.as_deref().is_some_and(reserved_namespace) { None } else { pick(None) }
    };
    namespaced.or_else(cluster_wide)
}

/// Templates that policies never claim: derived objects, objects handed to another
/// controller, and kinds Karmada never propagates (events, leases).
fn claimable(template: &Template) -> bool {
    let key = &template.key;
    template.derived_from.is_none()
        && !template.labels.contains_key(CLAIMED_BY)
        && !(key.kind == "Event" && matches!(key.group(), "" | "events.k8s.io"))
        && key.group() != "coordination.k8s.io"
}

fn reserved_namespace(ns: &str) -> bool {
    ns == "karmada-system" || ns == "karmada-cluster" || ns.starts_with("karmada-es-")
}

fn namespace_synced(template: &Template) -> bool {
    !system_namespace(&template.key.name) && template.labels.get(SKIP_NAMESPACE_SYNC) != Some("true")
}

/// `default`, `kube-*` and Karmada's reserved namespaces.
fn system_namespace(name: &str) -> bool {
    name == "default" || name.starts_with("kube-") || reserved_namespace(name)
}

#[cfg(test)]
mod tests;
