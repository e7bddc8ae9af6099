//! One rollout's decision: from what the rollout loop learns (a new revision of the
//! governed templates and its batches, each member's observed revision and health, the
//! gates' verdict, the windows, commands, the lease, the clock) to which revision each
//! member runs for those templates. Pure: time comes with each event, as unix
//! milliseconds, so the state can be kept in the host cluster and a new leader resumes
//! where the last one stood.
//!
//! | event                               | does                                                     |
//! |-------------------------------------|----------------------------------------------------------|
//! | the first revision                  | everywhere at once: there is nothing older to protect    |
//! | a newer revision                    | supersedes a rollout in progress (its moved members go   |
//! |                                     | back to the last good revision) and starts at batch 0;   |
//! |                                     | without batches (nothing of it moves), it is last good   |
//! | a revision that changes nothing the | takes the place of the revision rolling out (or of the   |
//! | rollout governs, or only replicas   | last good one) without a new rollout: the members that   |
//! | (`Advance`)                         | ran the old one get it, soaks and waves go on            |
//! | a batch may start (windows open,    | its members get the new revision, if the batch before    |
//! | not paused)                         | still stands (else that one is judged and soaked again)  |
//! | every member of the batch observed  | the soak starts; it starts again once one turns          |
//! | at the revision and healthy         | unhealthy or leaves the revision and is back             |
//! | the soak lasted `minSuccessTime`    | the next batch may start; after the last, the revision  |
//! | with the gates passing              | is the last good one                                     |
//! | a gate fails during the soak        | halt                                                     |
//! | `progressDeadline` passes           | members not there yet count as failed; over              |
//! |                                     | `maxFailures`: halt                                      |
//! | halt                                | `Pause` holds; `Revert` sends the moved members back to  |
//! |                                     | the last good revision                                   |
//! | pause / resume / abort              | hold / go on (after a revert: from batch 0) / send the   |
//! |                                     | moved members back and stop; the aborted revision (or    |
//! |                                     | one governing the same: `StillAborted`) is not rolled    |
//! |                                     | out again, a different one is                            |
//! | the lease lost / won                | nothing is sent without it; winning it sends every       |
//! |                                     | member its current target again                          |
//!
//! Invariants (property-tested): no member of a batch gets the new revision before
//! every member of the batches before it stood at it, healthy, for `minSuccessTime`
//! (failed ones aside, up to `maxFailures`); no batch starts while windows are closed or
//! the rollout is paused or halted; nothing is sent without the lease; only members of
//! the batches get targets; a revert sends only the moved members, and only the last
//! good revision.

use std::collections::BTreeSet;

use super::Batch;
use crate::model::rollout::{Amount, OnFailure};

mod kept;
mod phases;

use kept::reverted;
pub use kept::{Active, Finished, Phase, State, Times};

/// A rollout's settings, from its policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Soak per batch (ms).
    pub min_success_ms: i64,
    /// Time a batch may take to stand at the revision, healthy (ms).
    pub progress_deadline_ms: i64,
    /// Failures tolerated per batch.
    pub max_failures: Amount,
    /// What a halt does.
    pub on_failure: OnFailure,
}

/// Something that happened.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A revision of the governed templates rendered, with the batches it moves in.
    Revision { revision: String, batches: Vec<Batch>, now: i64 },
    /// A revision whose governed objects are those of the revision rolling out (or of
    /// the last good one, when none is), or differ only in what goes everywhere at once
    /// (replica counts): it takes that revision's place, without a new rollout.
    Advance { revision: String, now: i64 },
    /// A member's governed templates were observed: the revision they run (`None`: not
    /// known) and whether they are healthy.
    Member { cluster: String, at: Option<String>, healthy: bool, now: i64 },
    /// The gates' verdict: `None` when all pass, else which failed and why.
    Gates { failing: Option<String>, now: i64 },
    /// Whether the windows let a batch start.
    Windows { open: bool, now: i64 },
    /// Time passed.
    Tick(i64),
    /// `flotilla rollout pause`.
    Pause(i64),
    /// `flotilla rollout resume`: also clears a halt (the batch's clock starts again).
    Resume(i64),
    /// `flotilla rollout abort`: the moved members go back to the last good revision.
    Abort(i64),
    /// A revision whose governed objects are those of the aborted one: it stays aborted.
    StillAborted { revision: String },
    /// Whether this instance leads.
    Leading(bool),
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `cluster` converges on `revision` for the governed templates.
    Target { cluster: String, revision: String },
}

impl State {
    /// Takes one event; returns what to send (the newest target per member).
    pub fn step(&mut self, settings: &Settings, event: Event) -> Vec<Action> {
        let mut out = Vec::new();
        let now = match event {
            Event::Revision { revision, batches, now } => {
                self.revision(revision, batches, now, &mut out);
                now
            }
            Event::Advance { revision, now } => {
                self.advance(revision, &mut out);
                now
            }
            Event::Member { cluster, at, healthy, now } => {
                self.members.insert(cluster, (at, healthy));
                now
            }
            Event::Gates { failing, now } => {
                self.gates_failing = failing;
                now
            }
            Event::Windows { open, now } => {
                self.windows_open = open;
                now
            }
            Event::Tick(now) => now,
            Event::Pause(now) => {
                self.paused = true;
                now
            }
            Event::Resume(now) => {
                self.paused = false;
                self.resume(now);
                now
            }
            Event::Abort(now) => {
                self.aborted = self.active.as_ref().map(|a| a.revision.clone()).or(self.aborted.take());
                self.stop(&mut out);
                now
            }
            Event::StillAborted { revision } => {
                self.aborted = Some(revision);
                return out;
            }
            Event::Leading(leading) => {
                self.leading = leading;
                if leading {
                    self.send_all(&mut out);
                }
                return out;
            }
        };
        while let Some(next) = self.next_phase(settings, now, &mut out) {
            self.active.as_mut().expect("a next phase needs a rollout").phase = next;
        }
        if !self.leading {
            return Vec::new();
        }
        // One target per member: the last decided.
        let mut seen = BTreeSet::new();
        let mut newest: Vec<Action> =
            out.into_iter().rev().filter(|Action::Target { cluster, .. }| seen.insert(cluster.clone())).collect();
        newest.reverse();
        newest
    }

    fn revision(&mut self, revision: String, batches: Vec<Batch>, now: i64, out: &mut Vec<Action>) {
        let current = self.active.as_ref().map(|a| &a.revision).or(self.last_good.as_ref());
        if current == Some(&revision) || self.aborted.as_ref() == Some(&revision) {
            return;
        }
        self.aborted = None;
        if self.last_good.is_none() || batches.is_empty() {
            // Nothing older to protect (the first revision), or nothing of it moves:
            // it goes everywhere, ending a rollout in progress.
            self.stop(out);
            for cluster in batches.iter().flat_map(|b| &b.clusters) {
                out.push(Action::Target { cluster: cluster.clone(), revision: revision.clone() });
            }
            self.last_good = Some(revision);
            self.send_all(out);
            return;
        }
        // A newer revision supersedes the rollout in progress, as a new update does in
        // Argo Rollouts: the members it moved go back to the last good revision, and the
        // new one starts at the first batch. Back at the last good revision itself (a
        // revert in Git), the rollout simply ends.
        self.stop(out);
        if self.last_good.as_ref() == Some(&revision) {
            return;
        }
        self.active = Some(Active {
            revision,
            batches,
            phase: Phase::Waiting { batch: 0 },
            batch_started: now,
            moved: BTreeSet::new(),
            failed: BTreeSet::new(),
            times: Vec::new(),
        });
    }

    /// `revision` takes the place of the one rolling out (or the last good one): what
    /// members were observed at is renamed with it, so a soak goes on.
    fn advance(&mut self, revision: String, out: &mut Vec<Action>) {
        self.aborted = None;
        let old = self.active.as_ref().map(|a| a.revision.clone()).or(self.last_good.clone());
        for (at, _) in self.members.values_mut() {
            if old.is_some() && *at == old {
                *at = Some(revision.clone());
            }
        }
        if self.active.is_some() && self.last_good.as_ref() == Some(&revision) {
            // The rollout's revision becomes the last good one again: nothing is left
            // to roll out.
            self.stop(out);
            return self.send_all(out);
        }
        let Some(active) = &mut self.active else {
            self.last_good = Some(revision);
            return self.send_all(out);
        };
        active.revision = revision.clone();
        if !reverted(active) {
            for cluster in &active.moved {
                out.push(Action::Target { cluster: cluster.clone(), revision: revision.clone() });
            }
        }
    }

    /// Ends the rollout, sending its moved members back.
    fn stop(&mut self, out: &mut Vec<Action>) {
        self.send_back(out);
        self.active = None;
    }

    /// Every member's current target, for a new leader.
    fn send_all(&self, out: &mut Vec<Action>) {
        let batches = self.active.iter().flat_map(|a| a.batches.iter().flat_map(|b| &b.clusters));
        let clusters: BTreeSet<&String> = self.members.keys().chain(batches).collect();
        for cluster in clusters {
            if let Some(revision) = self.target(cluster) {
                out.push(Action::Target { cluster: cluster.clone(), revision: revision.to_owned() });
            }
        }
    }
}

#[cfg(test)]
mod tests;
