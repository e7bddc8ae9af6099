//! The rollout loop's decision: from the revisions the reconcile loop publishes to what
//! each member converges on. Pure: plans arrive in events, time as unix milliseconds.
//! One [`rollout::step::State`] per RolloutPolicy decides which revision each member
//! runs for the templates that policy governs (docs/rollouts.md); this step chooses the
//! event each new revision is for that policy, keeps the plans of the revisions members
//! are held at, and turns the policies' targets into one assignment for the fleet.
//!
//! | event                              | does                                                    |
//! |------------------------------------|---------------------------------------------------------|
//! | a revision published               | per policy: nothing governed changes, or only replicas  |
//! |                                    | (unless `replicaOnlyChanges: Waves`): `Advance`; else a |
//! |                                    | rollout (a newer one supersedes, and one that moves     |
//! |                                    | nothing against the last good revision ends it)         |
//! | the same revision rendered again   | the head's plan is replaced (a failover move, a resync) |
//! | (a new health overlay, a resync)   | and every held revision is rendered again alike, so a   |
//! |                                    | held member follows failover too                        |
//! | a held revision rendered           | its plan is kept; one that cannot be (gone from Git)    |
//! |                                    | ends its policy's rollout, with a warning               |
//! | observations, gates, commands,     | to the policy's decision; windows are judged on ticks   |
//! | ticks                              |                                                         |
//! | the lease won                      | nothing is assigned until the stored state is read (a   |
//! |                                    | new leader resumes where the last one stood)            |
//!
//! A Pull member's agent runs this step as a **follower**: it decides nothing, saves
//! nothing, and holds its member exactly as the stored state it reads each period (the
//! push controller's) says.
//!
//! An assignment is sent only when it changes, and only when every plan it needs is
//! there: a member is never sent the head's governed objects for want of the plan it is
//! held at. A revision with no RolloutPolicy, while no rollout holds anything, is
//! assigned as it comes, without waiting for the stored state.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use flotilla_core::model::Plan;
use flotilla_core::model::rollout::ReplicaOnlyChanges;
use flotilla_core::rollout::{self, Change, PolicyId};

use crate::clusters::Held;

/// A person's command (`flotilla rollout pause|resume|abort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Command {
    /// Hold where it stands.
    Pause,
    /// Go on (after a halt, judging the batch afresh).
    Resume,
    /// Send the moved members back and end the rollout.
    Abort,
}

/// Something that happened.
#[derive(Debug, Clone)]
pub enum Event {
    /// Whether this instance leads.
    Leading(bool),
    /// The stored state, read after the lease was won: `None` when none is stored, or
    /// there is no host cluster to store it in (then what this process knows stands).
    Loaded(Option<Stored>),
    /// A revision the reconcile loop rendered and published.
    Published { revision: String, plan: Arc<Plan>, now: i64 },
    /// A revision members are held at, rendered as the head was; `Err` when it cannot
    /// be (no longer in Git, or it no longer renders).
    Rendered { revision: String, plan: Result<Arc<Plan>, String> },
    /// A member's objects governed by `policy`, observed: the revision they are at
    /// (`None`: neither known one, or not observable) and whether they are healthy.
    Observed { policy: PolicyId, cluster: String, at: Option<String>, healthy: bool, now: i64 },
    /// A policy's gates: the first that fails and why, if one does.
    Gates { policy: PolicyId, failing: Option<String>, now: i64 },
    /// A person's command, numbered: each number is carried out once.
    Command { policy: PolicyId, id: u64, command: Command, now: i64 },
    /// Time passed.
    Tick(i64),
}

impl Event {
    fn now(&self) -> Option<i64> {
        match self {
            Event::Published { now, .. }
            | Event::Observed { now, .. }
            | Event::Gates { now, .. }
            | Event::Command { now, .. }
            | Event::Tick(now) => Some(*now),
            Event::Leading(_) | Event::Loaded(_) | Event::Rendered { .. } => None,
        }
    }
}

/// What to do.
#[derive(Debug, Clone)]
pub enum Action {
    /// Render `revision` as the head was rendered, and say so with `Rendered`.
    Render(String),
    /// Keep this in the host cluster (before the assignment that follows it).
    Save(Stored),
    /// The members converge on this.
    Assign(Assignment),
    /// Say this in the log.
    Warn(String),
}

/// A revision and its plan.
#[derive(Debug, Clone)]
pub struct Published {
    /// The revision.
    pub revision: String,
    /// Its plan.
    pub plan: Arc<Plan>,
}

/// What the members converge on: the head, except what rollouts hold each member at.
#[derive(Debug, Clone)]
pub struct Assignment {
    /// The newest revision.
    pub head: Published,
    /// Per member, the governed objects it takes from older revisions.
    pub holds: BTreeMap<String, Vec<Held>>,
}

/// What is kept in the host cluster: each policy's rollout, and the last command
/// carried out for each.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stored {
    /// Each policy's rollout.
    pub policies: Vec<(PolicyId, rollout::step::State)>,
    /// The number of the last command carried out, per policy.
    pub handled: Vec<(PolicyId, u64)>,
}

/// The loop's state.
#[derive(Debug, Default)]
pub struct State {
    policies: BTreeMap<PolicyId, rollout::step::State>,
    handled: BTreeMap<PolicyId, u64>,
    head: Option<Published>,
    /// Plans of the revisions members are held at, rendered as the head was.
    plans: BTreeMap<String, Arc<Plan>>,
    /// Revisions asked to be rendered and not rendered yet.
    rendering: BTreeSet<String>,
    /// A follower's revisions that did not render: not asked for again until the next
    /// read of the stored state (its Git may not have them yet).
    failed: BTreeSet<String>,
    /// The stored state was read since the lease was won (or nothing is to be read).
    loaded: bool,
    leading: bool,
    /// The latest time an event carried.
    now: i64,
    /// A Pull agent's: it follows the stored state and decides nothing.
    follower: bool,
    /// A sharded replica's (`--sharding`): it decides while it leads the fleet, and
    /// follows the stored state (as an agent does) while another replica leads.
    sharded: bool,
    /// What was last assigned and saved, to send each only when it changes.
    assigned: Option<Identity>,
    saved: Option<Stored>,
}

impl State {
    /// A loop that has read nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes one event; returns what to do, in order.
    pub fn step(&mut self, event: Event) -> Vec<Action> {
        let mut out = Vec::new();
        if let Some(now) = event.now() {
            self.now = self.now.max(now);
        }
        // A change of leadership goes the deciding way (a new leader reads where the
        // last one stood), whatever follows it.
        if self.follower || (self.following() && !matches!(event, Event::Leading(_))) {
            self.follow(event, &mut out);
            self.decide(&mut out);
            return out;
        }
        match event {
            Event::Leading(leading) => {
                self.leading = leading;
                // A new leader reads where the last one stood before it assigns.
                self.loaded = false;
                self.assigned = None;
                for state in self.policies.values_mut() {
                    state.leading = leading;
                }
                return out;
            }
            Event::Loaded(stored) => out = self.load(stored),
            Event::Published { revision, plan, now } => self.publish(revision, plan, now, &mut out),
            Event::Rendered { revision, plan } => {
                self.rendering.remove(&revision);
                match plan {
                    Ok(plan) => {
                        self.plans.insert(revision, plan);
                        if self.loaded {
                            out = self.revise_head();
                        }
                    }
                    Err(why) => self.abandon(&revision, &why, &mut out),
                }
            }
            Event::Observed { policy, cluster, at, healthy, now } => {
                self.forward(&policy, rollout::step::Event::Member { cluster, at, healthy, now })
            }
            Event::Gates { policy, failing, now } => {
                self.forward(&policy, rollout::step::Event::Gates { failing, now })
            }
            Event::Command { policy, id, command, now } => {
                if self.handled.get(&policy).is_some_and(|done| *done >= id) {
                    return out;
                }
                self.handled.insert(policy.clone(), id);
                let event = match command {
                    Command::Pause => rollout::step::Event::Pause(now),
                    Command::Resume => rollout::step::Event::Resume(now),
                    Command::Abort => rollout::step::Event::Abort(now),
                };
                self.forward(&policy, event);
            }
            Event::Tick(now) => self.tick(now),
        }
        self.decide(&mut out);
        out
    }

    fn load(&mut self, stored: Option<Stored>) -> Vec<Action> {
        if let Some(stored) = stored {
            self.policies = stored.policies.into_iter().collect();
            self.handled = stored.handled.into_iter().collect();
            self.saved = Some(self.stored());
        }
        for state in self.policies.values_mut() {
            state.leading = self.leading;
        }
        self.loaded = true;
        self.revise_head()
    }

    /// Each policy's event for the head (again: a policy already at it does nothing).
    fn revise_head(&mut self) -> Vec<Action> {
        let mut out = Vec::new();
        if let Some(head) = self.head.clone() {
            self.revise(&head.revision, &head.plan, self.now, &mut out);
        }
        out
    }

    fn publish(&mut self, revision: String, plan: Arc<Plan>, now: i64, out: &mut Vec<Action>) {
        let again = self.head.as_ref().is_some_and(|h| h.revision == revision);
        let previous = self.head.replace(Published { revision: revision.clone(), plan: plan.clone() });
        if let Some(previous) = previous.filter(|_| !again) {
            // The last good revision of every policy that has no rollout in progress:
            // kept while a policy holds members at it.
            self.plans.insert(previous.revision, previous.plan);
        }
        if again {
            // The same revision rendered anew (a health overlay, a resync): held
            // revisions are rendered anew alike.
            for held in self.plans.keys().filter(|r| **r != revision) {
                if self.rendering.insert(held.clone()) {
                    out.push(Action::Render(held.clone()));
                }
            }
            return;
        }
        if !self.loaded || self.following() {
            return;
        }
        self.revise(&revision, &plan, now, out);
    }

    /// Each policy's event for a new head.
    fn revise(&mut self, revision: &str, plan: &Arc<Plan>, now: i64, out: &mut Vec<Action>) {
        let declared: BTreeSet<PolicyId> = plan.loaded.rollout_policies.iter().map(|p| PolicyId::of(p)).collect();
        // A policy gone from Git holds nothing any more: its templates go at once.
        self.policies.retain(|id, _| declared.contains(id));
        for id in declared {
            let spec = &id.find(&plan.loaded).expect("declared").spec;
            let leading = self.leading;
            let state = self.policies.entry(id.clone()).or_insert_with(|| {
                let mut state = rollout::step::State::new();
                state.leading = leading;
                state
            });
            let current = state.active.as_ref().map(|a| a.revision.clone()).or(state.last_good.clone());
            let Some(current) = current else {
                // The first revision this policy sees: nothing older to protect.
                let event = rollout::step::Event::Revision { revision: revision.into(), batches: vec![], now };
                state.step(&rollout::settings(spec), event);
                continue;
            };
            if current == revision {
                continue;
            }
            let event = match event_for(&self.plans, state, (&id, spec.replica_only_changes), (revision, plan), now) {
                Ok(event) => event,
                Err(missing) => {
                    if self.rendering.insert(missing.clone()) {
                        out.push(Action::Render(missing));
                    }
                    continue;
                }
            };
            state.step(&rollout::settings(spec), event);
        }
    }

    /// Ends the rollouts that hold members at `revision`, which cannot be rendered.
    fn abandon(&mut self, revision: &str, why: &str, out: &mut Vec<Action>) {
        let Some(head) = self.head.clone() else { return };
        for (id, state) in &mut self.policies {
            let holds = state.last_good.as_deref() == Some(revision)
                || state.active.as_ref().is_some_and(|a| a.revision == revision);
            if !holds {
                continue;
            }
            out.push(Action::Warn(format!(
                "{id}: revision {revision} cannot be rendered ({why}); its rollout ends and every member gets {}",
                head.revision
            )));
            let mut fresh = rollout::step::State::new();
            fresh.leading = self.leading;
            fresh.last_good = Some(head.revision.clone());
            *state = fresh;
        }
    }

    fn forward(&mut self, policy: &PolicyId, event: rollout::step::Event) {
        let Some(head) = &self.head else { return };
        let (Some(state), Some(declared)) = (self.policies.get_mut(policy), policy.find(&head.plan.loaded)) else {
            return;
        };
        state.step(&rollout::settings(&declared.spec), event);
    }

    fn tick(&mut self, now: i64) {
        let Some(head) = &self.head else { return };
        for (id, state) in &mut self.policies {
            let Some(declared) = id.find(&head.plan.loaded) else { continue };
            let settings = rollout::settings(&declared.spec);
            let open = rollout::windows(&declared.spec.windows, now.div_euclid(1000)) == rollout::Gate::Open;
            state.step(&settings, rollout::step::Event::Windows { open, now });
            state.step(&settings, rollout::step::Event::Tick(now));
        }
    }

    /// Saves and assigns what changed, once everything needed is there.
    fn decide(&mut self, out: &mut Vec<Action>) {
        let Some(head) = self.head.clone() else { return };
        let holding = !self.policies.is_empty() || !head.plan.loaded.rollout_policies.is_empty();
        if holding && !self.loaded {
            return;
        }
        if self.loaded && self.leading && !self.following() {
            let stored = self.stored();
            if self.saved.as_ref().is_none_or(|saved| durable(saved) != durable(&stored)) {
                self.saved = Some(stored.clone());
                out.push(Action::Save(stored));
            }
        }
        let assignment = match self.assignment(&head) {
            Ok(assignment) => assignment,
            Err(missing) => return self.ask(missing, out),
        };
        let identity = identity(&assignment);
        if self.assigned.as_ref() != Some(&identity) {
            self.assigned = Some(identity);
            out.push(Action::Assign(assignment));
        }
        // Plans no policy refers to are not kept; those it refers to and that are
        // missing (a state read from the host) are rendered: observing a rollout needs
        // its last good revision's plan even once no member is held at it.
        let held: BTreeSet<String> = self.policies.values().flat_map(revisions).map(str::to_owned).collect();
        self.plans.retain(|revision, _| held.contains(revision));
        let missing: Vec<String> =
            held.into_iter().filter(|r| *r != head.revision && !self.plans.contains_key(r)).collect();
        for revision in missing {
            self.ask(revision, out);
        }
    }

    /// Asks for `revision`'s plan, unless it is asked for already or (a follower's) did
    /// not render since the last read.
    fn ask(&mut self, revision: String, out: &mut Vec<Action>) {
        if !self.failed.contains(&revision) && self.rendering.insert(revision.clone()) {
            out.push(Action::Render(revision));
        }
    }

    fn stored(&self) -> Stored {
        Stored {
            policies: self.policies.iter().map(|(id, s)| (id.clone(), s.clone())).collect(),
            handled: self.handled.iter().map(|(id, n)| (id.clone(), *n)).collect(),
        }
    }

    /// Each policy's rollout, for status.
    pub fn policies(&self) -> &BTreeMap<PolicyId, rollout::step::State> {
        &self.policies
    }

    /// The newest revision published.
    pub fn head(&self) -> Option<&Published> {
        self.head.as_ref()
    }
}

/// The event a new head is for a policy whose current revision is not the head, or the
/// revision whose plan is missing to tell.
fn event_for(
    plans: &BTreeMap<String, Arc<Plan>>,
    state: &rollout::step::State,
    (id, replicas): (&PolicyId, ReplicaOnlyChanges),
    (revision, plan): (&str, &Arc<Plan>),
    now: i64,
) -> Result<rollout::step::Event, String> {
    let of = |r: &String| plans.get(r).cloned().ok_or_else(|| r.clone());
    let at_once = |change: &Change| match change {
        Change::Same => true,
        Change::ReplicasOnly(_) => replicas == ReplicaOnlyChanges::Immediate,
        Change::Moves(_) => false,
    };
    let good = state.last_good.as_ref().expect("a current revision");
    if let Some(aborted) = &state.aborted {
        let aborted = of(aborted)?;
        if at_once(&rollout::change(&aborted, plan, id)) {
            return Ok(rollout::step::Event::StillAborted { revision: revision.into() });
        }
    }
    if let Some(active) = &state.active {
        let rolling = of(&active.revision)?;
        if at_once(&rollout::change(&rolling, plan, id)) {
            return Ok(rollout::step::Event::Advance { revision: revision.into(), now });
        }
    }
    let good = of(good)?;
    let change = rollout::change(&good, plan, id);
    if at_once(&change) {
        // Against the last good revision nothing waits: with a rollout in progress,
        // this ends it (a revert in Git); without one, the head takes its place.
        return Ok(match state.active {
            Some(_) => rollout::step::Event::Revision { revision: revision.into(), batches: vec![], now },
            None => rollout::step::Event::Advance { revision: revision.into(), now },
        });
    }
    let spec = &id.find(&plan.loaded).expect("declared").spec;
    let batches = rollout::batches(spec, &plan.loaded.clusters, &change.clusters());
    Ok(rollout::step::Event::Revision { revision: revision.into(), batches, now })
}

/// The revisions a policy may hold members at, or compares a new head with.
fn revisions(state: &rollout::step::State) -> impl Iterator<Item = &str> {
    let active = state.active.as_ref().map(|a| a.revision.as_str());
    state.last_good.as_deref().into_iter().chain(active).chain(state.aborted.as_deref())
}

mod assign;
mod follow;

pub use assign::Watch;
use assign::{Identity, durable, identity};

#[cfg(test)]
mod tests;
