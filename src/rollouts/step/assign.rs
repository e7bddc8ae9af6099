//! What the decision sends: the members' assignment (the head, with what each policy
//! holds each member at) and its identity (sent again only when it changes), what of
//! the state a save must keep, and what the executor observes for each rollout in
//! progress.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use flotilla_core::model::{ObjectKey, Plan};
use flotilla_core::rollout::{self, PolicyId, compose};

use super::{Assignment, Published, State, Stored};
use crate::clusters::Held;

impl State {
    /// What each member converges on, or the revision whose plan it needs and lacks.
    pub(super) fn assignment(&self, head: &Published) -> Result<Assignment, String> {
        let mut holds: BTreeMap<String, Vec<Held>> = BTreeMap::new();
        for (id, state) in &self.policies {
            let mut kept: BTreeMap<&str, Held> = BTreeMap::new();
            for cluster in head.plan.loaded.clusters.iter().map(|c| &c.name) {
                let Some(revision) = state.target(cluster).filter(|r| *r != head.revision) else { continue };
                if !kept.contains_key(revision) {
                    let plan = self.plans.get(revision).ok_or_else(|| revision.to_owned())?.clone();
                    let keys = Arc::new(compose::governed_keys(&head.plan, &plan, id.as_ref()));
                    kept.insert(revision, Held { policy: id.clone(), revision: revision.to_owned(), plan, keys });
                }
                holds.entry(cluster.clone()).or_default().push(kept[revision].clone());
            }
        }
        Ok(Assignment { head: head.clone(), holds })
    }

    /// What to observe: per rollout in progress (and not reverted), its revision, its
    /// plan, and the members that moved or move next.
    pub fn watching(&self) -> Vec<Watch> {
        let Some(head) = &self.head else { return Vec::new() };
        let mut out = Vec::new();
        for (id, state) in &self.policies {
            let Some(active) = &state.active else { continue };
            let plan =
                if active.revision == head.revision { Some(&head.plan) } else { self.plans.get(&active.revision) };
            let (Some(plan), Some(batch)) = (plan, current_batch(&active.phase)) else { continue };
            let Some(good) = state.last_good.as_ref().and_then(|g| self.plans.get(g)) else { continue };
            let mut members = active.moved.clone();
            members.extend(active.batches.get(batch).into_iter().flat_map(|b| b.clusters.iter().cloned()));
            let keys = Arc::new(compose::governed_keys(plan, good, id.as_ref()));
            out.push(Watch {
                policy: id.clone(),
                revision: active.revision.clone(),
                plan: plan.clone(),
                members,
                keys,
            });
        }
        out
    }
}

/// A rollout's members to observe at its revision.
#[derive(Debug, Clone)]
pub struct Watch {
    /// The policy.
    pub policy: PolicyId,
    /// The revision rolling out.
    pub revision: String,
    /// Its plan: the manifests the members must run.
    pub plan: Arc<Plan>,
    /// The members to observe.
    pub members: BTreeSet<String>,
    /// The objects the policy governs.
    pub keys: Arc<BTreeSet<ObjectKey>>,
}

/// The batch a phase stands at.
fn current_batch(phase: &rollout::step::Phase) -> Option<usize> {
    use rollout::step::Phase;
    match phase {
        Phase::Idle => None,
        Phase::Progressing { batch, .. } | Phase::Soaking { batch, .. } | Phase::Waiting { batch } => Some(*batch),
        Phase::Halted { batch, reverted, .. } => (!reverted).then_some(*batch),
    }
}

/// An assignment's identity: the head and its plan, then every hold's member, policy
/// and revision, and plan (by address: a plan rendered anew is a new one).
pub(super) type Identity = Vec<(String, String, usize)>;

pub(super) fn identity(assignment: &Assignment) -> Identity {
    let head = &assignment.head;
    let mut out = vec![(String::new(), head.revision.clone(), ptr(&head.plan))];
    for (member, holds) in &assignment.holds {
        out.extend(holds.iter().map(|h| (member.clone(), format!("{}@{}", h.policy, h.revision), ptr(&h.plan))));
    }
    out
}

fn ptr(plan: &Arc<Plan>) -> usize {
    Arc::as_ptr(plan) as usize
}

/// What a save must keep of one policy: its rollout, not what its members were last
/// seen at (observations change often and are learned again).
#[derive(PartialEq)]
pub(super) struct Durable<'a> {
    policy: &'a PolicyId,
    last_good: Option<&'a String>,
    aborted: Option<&'a String>,
    active: Option<&'a rollout::step::Active>,
    paused: bool,
    handled: Option<u64>,
}

pub(super) fn durable(stored: &Stored) -> Vec<Durable<'_>> {
    let handled: BTreeMap<&PolicyId, u64> = stored.handled.iter().map(|(id, n)| (id, *n)).collect();
    stored
        .policies
        .iter()
        .map(|(policy, s)| Durable {
            policy,
            last_good: s.last_good.as_ref(),
            aborted: s.aborted.as_ref(),
            active: s.active.as_ref(),
            paused: s.paused,
            handled: handled.get(policy).copied(),
        })
        .collect()
}
