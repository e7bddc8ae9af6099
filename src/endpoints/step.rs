//! The endpoints loop's decision, pure: which EndpointSlices each consumer must hold,
//! from what the watches of every member report, which providers answer, and which
//! services the last render exports. No I/O and no clock: `now` comes with the events.
//!
//! | event                              | does                                              |
//! |------------------------------------|---------------------------------------------------|
//! | a render                           | watch its providers and consumers; re-list a      |
//! |                                    | provider that provides more than before           |
//! | a member listed, a slice changed   | write what consumers lack, delete what they must  |
//! |                                    | not hold; nothing when the digests agree          |
//! | no answer for `unreachable_after`  | withdraw that provider's endpoints everywhere     |
//! | an answer again                    | re-list it; its endpoints return once listed      |
//! | a write failed                     | retry that consumer after `retry`                 |
//! | leadership gained                  | forget everything and re-list: the members' state |
//! |                                    | is the truth a new leader starts from             |

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use flotilla_core::multicluster::{self, Exported, Slice};
use serde_json::Value;

/// How the loop decides.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The instance whose slices these are.
    pub instance: String,
    /// A provider silent this long has its endpoints withdrawn.
    pub unreachable_after: Duration,
    /// A consumer whose write failed is tried again after this long.
    pub retry: Duration,
}

/// An object in one namespace.
pub type Key = (String, String);

/// What the loop knows of one member.
#[derive(Debug, Clone)]
struct Member {
    /// The watch has listed it since it was (re)started.
    listed: bool,
    /// Slices of the services it provides, by slice key.
    sources: BTreeMap<Key, Slice>,
    /// flotilla's slices in it: their digest and resourceVersion (`None`: unknown, as
    /// after a failed write).
    imported: BTreeMap<Key, Option<(String, u64)>>,
    /// The provider each of flotilla's slices here came from.
    origin: BTreeMap<Key, String>,
    /// Writes in flight, by slice: the digest being written.
    pending: BTreeMap<Key, Option<String>>,
    /// The last answer (or when watching began).
    last_ok: Instant,
    /// Silent past `unreachable_after`: its endpoints are withdrawn.
    lost: bool,
    /// Writes to it wait until then after a failure.
    retry_at: Option<Instant>,
}

impl Member {
    fn new(now: Instant) -> Self {
        Member {
            listed: false,
            sources: BTreeMap::new(),
            imported: BTreeMap::new(),
            origin: BTreeMap::new(),
            pending: BTreeMap::new(),
            last_ok: now,
            lost: false,
            retry_at: None,
        }
    }
}

/// Everything the loop knows.
#[derive(Debug, Clone)]
pub struct State {
    settings: Settings,
    leading: bool,
    services: Vec<Exported>,
    /// Push members of the last render that the controller can reach.
    clusters: BTreeSet<String>,
    members: BTreeMap<String, Member>,
    /// ServiceExport creation times: (cluster, namespace, name) → RFC 3339.
    created: BTreeMap<(String, String, String), String>,
    /// Creation times asked for.
    asked: BTreeSet<(String, String, String)>,
    /// `Conflict` conditions written: (cluster, namespace, name) → message (None: False).
    conditions: BTreeMap<(String, String, String), Option<String>>,
    /// Every member was listed once since this instance began to lead.
    surveyed: bool,
}

/// What happened.
#[derive(Debug, Clone)]
pub enum Event {
    /// Leadership changed.
    Leading(bool, Instant),
    /// A render: its exported services and the members the controller reaches.
    Rendered { services: Vec<Exported>, clusters: BTreeSet<String>, now: Instant },
    /// A member's watch listed every EndpointSlice.
    Listed { cluster: String, objects: Vec<Value>, now: Instant },
    /// A slice was created or changed.
    Applied { cluster: String, object: Value, now: Instant },
    /// A slice was deleted.
    Deleted { cluster: String, object: Value, now: Instant },
    /// A member answered its probe (or did not).
    Probed { cluster: String, ok: bool, now: Instant },
    /// A write finished: the resourceVersion written, or why it failed.
    Wrote { cluster: String, key: Key, result: Result<Option<u64>, String>, now: Instant },
    /// A ServiceExport's creation time.
    Created { cluster: String, key: Key, at: String, now: Instant },
    /// Time passed.
    Tick(Instant),
}

/// What to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Watch (and probe) exactly these members; stop the others.
    Watch(BTreeSet<String>),
    /// Restart one member's watch, so it lists again.
    Rewatch(String),
    /// Apply this slice in the member.
    Put { cluster: String, object: Value },
    /// Delete this slice from the member.
    Delete { cluster: String, key: Key },
    /// Read a ServiceExport's creation time.
    ReadCreated { cluster: String, key: Key },
    /// Set the `Conflict` condition of a ServiceExport (`None`: False).
    Condition { cluster: String, key: Key, conflict: Option<String> },
}

impl State {
    /// Nothing known yet.
    pub fn new(settings: Settings) -> Self {
        State {
            settings,
            leading: false,
            services: Vec::new(),
            clusters: BTreeSet::new(),
            members: BTreeMap::new(),
            created: BTreeMap::new(),
            asked: BTreeSet::new(),
            conditions: BTreeMap::new(),
            surveyed: false,
        }
    }

    /// Takes one event; returns what to do.
    pub fn step(&mut self, event: Event) -> Vec<Action> {
        let mut actions = Vec::new();
        let now = match event {
            Event::Leading(leading, now) => {
                self.lead(leading);
                if !leading {
                    return vec![Action::Watch(BTreeSet::new())];
                }
                now
            }
            Event::Rendered { services, clusters, now } => {
                self.rendered(services, clusters, now, &mut actions);
                now
            }
            Event::Listed { cluster, objects, now } => {
                self.listed(&cluster, objects, now);
                now
            }
            Event::Applied { cluster, object, now } => {
                self.changed(&cluster, &object, true);
                now
            }
            Event::Deleted { cluster, object, now } => {
                self.changed(&cluster, &object, false);
                now
            }
            Event::Probed { cluster, ok, now } => {
                self.probed(&cluster, ok, now, &mut actions);
                now
            }
            Event::Wrote { cluster, key, result, now } => {
                self.wrote(&cluster, key, result, now);
                now
            }
            Event::Created { cluster, key, at, now } => {
                self.created.insert((cluster, key.0, key.1), at);
                now
            }
            Event::Tick(now) => {
                self.expire(now);
                now
            }
        };
        if self.leading {
            self.follow_up(now, &mut actions);
        }
        actions
    }

    /// A new leader starts from the members' state: everything is listed again.
    fn lead(&mut self, leading: bool) {
        self.leading = leading;
        self.members.clear();
        self.conditions.clear();
        self.asked.clear();
        self.surveyed = false;
    }

    /// After any event, while leading: the watched members, conflicts, and the writes
    /// that bring the consumers to what the providers hold.
    fn follow_up(&mut self, now: Instant, actions: &mut Vec<Action>) {
        if let Some(watch) = self.watch_set() {
            for cluster in &watch {
                self.members.entry(cluster.clone()).or_insert_with(|| Member::new(now));
            }
            self.members.retain(|c, _| watch.contains(c));
            actions.push(Action::Watch(watch));
        }
        self.conflicts(actions);
        self.reconcile(now, actions);
    }

    fn rendered(&mut self, services: Vec<Exported>, clusters: BTreeSet<String>, now: Instant, out: &mut Vec<Action>) {
        let before = self.provided();
        self.services = services;
        self.clusters = clusters;
        let after = self.provided();
        for (cluster, member) in &mut self.members {
            let grew = after.get(cluster).is_some_and(|now| before.get(cluster).is_none_or(|b| !now.is_subset(b)));
            if grew && member.listed {
                // Slices of a newly provided service were not kept: list again.
                member.listed = false;
                member.last_ok = now;
                out.push(Action::Rewatch(cluster.clone()));
            }
            let provided = after.get(cluster);
            member
                .sources
                .retain(|_, s| provided.is_some_and(|p| p.contains(&(s.namespace.clone(), s.service.clone()))));
        }
    }

    /// Per member, the (namespace, Service) pairs it provides.
    fn provided(&self) -> BTreeMap<String, BTreeSet<Key>> {
        let mut out: BTreeMap<String, BTreeSet<Key>> = BTreeMap::new();
        for s in &self.services {
            for provider in s.providers.keys() {
                out.entry(provider.clone()).or_default().insert((s.namespace.clone(), s.name.clone()));
            }
        }
        out
    }

    /// The members to watch, when that set changed: every provider and consumer, and
    /// any member still holding flotilla's slices or not listed yet since leading (so
    /// slices left from services that went are found and removed).
    fn watch_set(&self) -> Option<BTreeSet<String>> {
        let mut wanted: BTreeSet<String> = self.provided().into_keys().collect();
        wanted.extend(self.services.iter().flat_map(|s| s.consumers.iter().cloned()));
        for (cluster, member) in &self.members {
            if !member.listed || !member.imported.is_empty() || !member.pending.is_empty() {
                wanted.insert(cluster.clone());
            }
        }
        if !self.surveyed {
            // Just began to lead: list every member once.
            wanted.extend(self.clusters.iter().cloned());
        }
        wanted.retain(|c| self.clusters.contains(c));
        let current: BTreeSet<String> = self.members.keys().cloned().collect();
        (wanted != current).then_some(wanted)
    }

    fn listed(&mut self, cluster: &str, objects: Vec<Value>, now: Instant) {
        let provided = self.provided().remove(cluster).unwrap_or_default();
        let instance = self.settings.instance.clone();
        let Some(member) = self.members.get_mut(cluster) else { return };
        member.listed = true;
        member.last_ok = now;
        member.sources.clear();
        member.imported.clear();
        for object in &objects {
            keep(member, object, &provided, &instance);
        }
        self.surveyed = self.surveyed || self.clusters.iter().all(|c| self.members.get(c).is_some_and(|m| m.listed));
    }

    fn changed(&mut self, cluster: &str, object: &Value, present: bool) {
        let provided = self.provided().remove(cluster).unwrap_or_default();
        let instance = self.settings.instance.clone();
        let Some(member) = self.members.get_mut(cluster).filter(|m| m.listed) else { return };
        if present {
            keep(member, object, &provided, &instance);
        } else if let Some(key) = key_of(object) {
            member.sources.remove(&key);
            if !member.pending.contains_key(&key) {
                member.imported.remove(&key);
            }
        }
    }

    fn probed(&mut self, cluster: &str, ok: bool, now: Instant, out: &mut Vec<Action>) {
        let Some(member) = self.members.get_mut(cluster) else { return };
        if !ok {
            return self.expire(now);
        }
        member.last_ok = now;
        if member.lost {
            // Back: what it holds now is listed before its endpoints return.
            member.lost = false;
            member.listed = false;
            member.sources.clear();
            out.push(Action::Rewatch(cluster.to_owned()));
        }
    }

    fn expire(&mut self, now: Instant) {
        let after = self.settings.unreachable_after;
        for member in self.members.values_mut() {
            if !member.lost && now.saturating_duration_since(member.last_ok) > after {
                member.lost = true;
            }
        }
    }

    fn wrote(&mut self, cluster: &str, key: Key, result: Result<Option<u64>, String>, now: Instant) {
        let retry = self.settings.retry;
        let Some(member) = self.members.get_mut(cluster) else { return };
        let digest = member.pending.remove(&key).flatten();
        match (result, digest) {
            (Ok(Some(version)), Some(digest)) => {
                member.imported.insert(key, Some((digest, version)));
            }
            (Ok(_), _) => {
                member.imported.remove(&key);
            }
            (Err(_), _) => {
                member.imported.insert(key, None);
                member.retry_at = Some(now + retry);
            }
        }
    }
}

/// The namespace and name of a live object.
fn key_of(object: &Value) -> Option<Key> {
    let metadata = object.get("metadata")?;
    Some((metadata.get("namespace")?.as_str()?.to_owned(), metadata.get("name")?.as_str()?.to_owned()))
}

/// The resourceVersion of a live object, as a number (etcd's revision).
fn version_of(object: &Value) -> Option<u64> {
    object.pointer("/metadata/resourceVersion")?.as_str()?.parse().ok()
}

/// Keeps a listed or changed slice: a source when it belongs to a service the member
/// provides, flotilla's own when this instance wrote it. A watch event older than the
/// write that came back already (by resourceVersion) changes nothing.
fn keep(member: &mut Member, object: &Value, provided: &BTreeSet<Key>, instance: &str) {
    let Some(key) = key_of(object) else { return };
    if let Some(slice) = Slice::read(object) {
        if provided.contains(&(slice.namespace.clone(), slice.service.clone())) {
            member.sources.insert(key, slice);
        }
        return;
    }
    let label = |k: &str| object.pointer("/metadata/labels").and_then(|l| l.get(k)).and_then(Value::as_str);
    if label(multicluster::INSTANCE_LABEL) != Some(instance) || member.pending.contains_key(&key) {
        return;
    }
    let version = version_of(object).unwrap_or_default();
    if let Some(Some((_, known))) = member.imported.get(&key)
        && *known > version
    {
        return;
    }
    let digest = multicluster::written_digest(object).unwrap_or_default().to_owned();
    member.origin.insert(key.clone(), label(multicluster::SOURCE_CLUSTER_LABEL).unwrap_or_default().to_owned());
    member.imported.insert(key, Some((digest, version)));
}

mod conflict;
mod report;
mod write;

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;
