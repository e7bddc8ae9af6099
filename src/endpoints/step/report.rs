//! What `/status` shows of the endpoints loop: per exported service, its providers and
//! consumers, read from the loop's state.

use std::collections::BTreeMap;

use flotilla_core::multicluster::{self, Slice};
use serde_json::Value;

use super::{Key, State};
use crate::status::{ConsumerStatus, ProviderStatus, ServiceStatus};

impl State {
    /// Per exported service (`namespace/name`), what it is doing.
    pub fn status(&self) -> BTreeMap<String, ServiceStatus> {
        let desired = self.desired();
        let mut out = BTreeMap::new();
        for service in &self.services {
            let losers = self.losers(service);
            let mut status = ServiceStatus { target: service.target(), ..Default::default() };
            for provider in service.providers.keys() {
                let member = self.members.get(provider);
                let state = match member {
                    Some(m) if m.lost => "unreachable",
                    Some(m) if !m.listed => "listing",
                    None => "listing",
                    Some(_) if losers.contains(provider) => "conflict",
                    Some(_) => "ready",
                };
                let ready = member
                    .map(|m| {
                        m.sources
                            .values()
                            .filter(|s| s.namespace == service.namespace && s.service == service.name)
                            .map(Slice::ready)
                            .sum()
                    })
                    .unwrap_or(0);
                status.providers.insert(provider.clone(), ProviderStatus { state: state.to_owned(), endpoints: ready });
            }
            for consumer in &service.consumers {
                let wanted: Vec<(&Key, &Value)> = desired
                    .get(consumer)
                    .into_iter()
                    .flatten()
                    .filter(|(_, o)| o["metadata"]["labels"][multicluster::MCS_SERVICE_LABEL] == service.name.as_str())
                    .collect();
                let ready = wanted.iter().filter_map(|(_, o)| Slice::read(&strip_manager(o))).map(|s| s.ready()).sum();
                let held = self.members.get(consumer).is_some_and(|m| {
                    wanted.iter().all(|(k, o)| {
                        m.imported.get(*k).and_then(|h| h.as_ref()).map(|(d, _)| d.as_str())
                            == multicluster::written_digest(o)
                    })
                });
                status
                    .consumers
                    .insert(consumer.clone(), ConsumerStatus { slices: wanted.len(), endpoints: ready, synced: held });
            }
            let created = self.created_of(service);
            status.conflict = multicluster::conflict(service, &created).map(|c| c.message);
            out.insert(service.id(), status);
        }
        out
    }
}

/// A copy of a slice flotilla writes, read as a source would be (to count endpoints).
fn strip_manager(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(labels) = copy.pointer_mut("/metadata/labels").and_then(Value::as_object_mut) {
        labels.remove(multicluster::MANAGED_BY_LABEL);
    }
    copy
}
