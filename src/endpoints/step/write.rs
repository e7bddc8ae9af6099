//! What each consumer must hold, and the writes that bring it there.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use flotilla_core::multicluster;
use serde_json::Value;

use super::{Action, Key, State};

impl State {
    /// The slices each consumer must hold, by consumer and slice key.
    pub(super) fn desired(&self) -> BTreeMap<String, BTreeMap<Key, Value>> {
        let mut out: BTreeMap<String, BTreeMap<Key, Value>> = BTreeMap::new();
        for service in &self.services {
            let losers = self.losers(service);
            for (provider, member) in &self.members {
                // A provider being listed again keeps serving what it had; a lost one
                // serves nothing, and after it returns, only what it lists.
                if !service.providers.contains_key(provider) || member.lost || losers.contains(provider) {
                    continue;
                }
                let slices =
                    member.sources.values().filter(|s| s.namespace == service.namespace && s.service == service.name);
                for slice in slices {
                    let object = multicluster::imported(service, provider, slice, &self.settings.instance);
                    let name = object["metadata"]["name"].as_str().unwrap_or_default().to_owned();
                    for consumer in service.consumers.iter().filter(|c| service.imports(c, provider)) {
                        out.entry(consumer.clone())
                            .or_default()
                            .insert((service.namespace.clone(), name.clone()), object.clone());
                    }
                }
            }
        }
        out
    }

    pub(super) fn reconcile(&mut self, now: Instant, out: &mut Vec<Action>) {
        let mut desired = self.desired();
        // A slice from a provider not listed yet (a new leader, a re-list) may still be
        // right: it is kept until that provider is listed or found unreachable.
        let unknown: BTreeSet<String> =
            self.members.iter().filter(|(_, m)| !m.listed && !m.lost).map(|(c, _)| c.clone()).collect();
        for (cluster, member) in &mut self.members {
            if !member.listed || member.retry_at.is_some_and(|at| at > now) {
                continue;
            }
            member.retry_at = None;
            let wanted = desired.remove(cluster).unwrap_or_default();
            for (key, object) in wanted.iter() {
                let digest = multicluster::written_digest(object).map(str::to_owned);
                let held = member.imported.get(key).and_then(|h| h.as_ref()).map(|(d, _)| d.clone());
                if member.pending.contains_key(key) || (held.is_some() && held == digest) {
                    continue;
                }
                member.pending.insert(key.clone(), digest);
                let source = object["metadata"]["labels"][multicluster::SOURCE_CLUSTER_LABEL].as_str();
                member.origin.insert(key.clone(), source.unwrap_or_default().to_owned());
                out.push(Action::Put { cluster: cluster.clone(), object: object.clone() });
            }
            let extra: Vec<Key> = member
                .imported
                .keys()
                .filter(|k| !wanted.contains_key(*k) && !member.pending.contains_key(*k))
                .filter(|k| member.origin.get(*k).is_none_or(|source| !unknown.contains(source)))
                .cloned()
                .collect();
            for key in extra {
                member.pending.insert(key.clone(), None);
                out.push(Action::Delete { cluster: cluster.clone(), key });
            }
        }
    }
}
