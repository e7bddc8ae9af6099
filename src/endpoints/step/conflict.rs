//! Exports that disagree on ports: who wins, whose endpoints are left out, and the
//! `Conflict` condition each export is told.

use std::collections::{BTreeMap, BTreeSet};

use flotilla_core::multicluster::{self, Exported, Via};

use super::{Action, State};

impl State {
    /// Providers left out of a service: losers of a port conflict.
    pub(super) fn conflicts(&mut self, out: &mut Vec<Action>) {
        for service in self.services.iter().filter(|s| s.via == Via::ServiceImport) {
            let created = self.created_of(service);
            let conflict = multicluster::conflict(service, &created);
            for provider in service.providers.keys() {
                let id = (provider.clone(), service.namespace.clone(), service.name.clone());
                let key = (service.namespace.clone(), service.name.clone());
                if conflict.is_some() && !created.contains_key(provider) && self.asked.insert(id.clone()) {
                    out.push(Action::ReadCreated { cluster: provider.clone(), key: key.clone() });
                }
                let wanted = conflict.as_ref().map(|c| c.message.clone());
                let written = self.conditions.get(&id).cloned();
                // Only exports that are or were in conflict get the condition written.
                if (wanted.is_some() || written.as_ref().is_some_and(|w| w.is_some()))
                    && written != Some(wanted.clone())
                {
                    self.conditions.insert(id, wanted.clone());
                    out.push(Action::Condition { cluster: provider.clone(), key, conflict: wanted });
                }
            }
        }
    }

    /// ServiceExport creation times of a service's providers, as far as known.
    pub(super) fn created_of(&self, service: &Exported) -> BTreeMap<String, String> {
        service
            .providers
            .keys()
            .filter_map(|c| {
                self.created
                    .get(&(c.clone(), service.namespace.clone(), service.name.clone()))
                    .map(|t| (c.clone(), t.clone()))
            })
            .collect()
    }

    pub(super) fn losers(&self, service: &Exported) -> BTreeSet<String> {
        if service.via != Via::ServiceImport {
            return BTreeSet::new();
        }
        multicluster::conflict(service, &self.created_of(service)).map(|c| c.losers).unwrap_or_default()
    }
}
