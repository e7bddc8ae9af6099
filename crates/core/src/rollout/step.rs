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
//! |                                     | back to the last good revision) and starts at batch 0    |
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
//! |                                     | moved members back and stop                              |
//! | the lease lost / won                | nothing is sent without it; winning it sends every       |
//! |                                     | member its current target again                          |
//!
//! Invariants (property-tested): no member of a batch gets the new revision before
//! every member of the batches before it stood at it, healthy, for `minSuccessTime`
//! (failed ones aside, up to `maxFailures`); no batch starts while windows are closed or
//! the rollout is paused or halted; nothing is sent without the lease; only members of
//! the batches get targets; a revert sends only the moved members, and only the last
//! good revision.

use std::collections::{BTreeMap, BTreeSet};

use super::Batch;
use crate::model::rollout::{Amount, OnFailure};

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
    /// Whether this instance leads.
    Leading(bool),
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `cluster` converges on `revision` for the governed templates.
    Target { cluster: String, revision: String },
}

/// Where the rollout stands, as status and metrics show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "state", rename_all = "camelCase")]
pub enum Phase {
    /// No rollout: every member runs the last good revision.
    Idle,
    /// Batch `batch`'s members were sent the revision at `since`.
    Progressing { batch: usize, since: i64 },
    /// Every member of batch `batch` has stood at the revision, healthy, since `since`.
    Soaking { batch: usize, since: i64 },
    /// Batch `batch` waits for a window (or a resume).
    Waiting { batch: usize },
    /// Halted at batch `batch`: why; the moved members hold (`Pause`) or went back.
    Halted { batch: usize, reason: String, reverted: bool },
}

/// The rollout in progress.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Active {
    /// The revision rolling out.
    pub revision: String,
    /// Its batches, in order.
    pub batches: Vec<Batch>,
    /// Where it stands.
    pub phase: Phase,
    /// When the current batch was sent the revision (its progress deadline runs from it).
    pub batch_started: i64,
    /// Members sent the revision.
    pub moved: BTreeSet<String>,
    /// Members of the current batch counted as failed.
    pub failed: BTreeSet<String>,
}

/// What the rollout remembers (kept in the host cluster by the loop).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct State {
    /// The revision every member ran when the last rollout finished.
    pub last_good: Option<String>,
    /// The rollout in progress.
    pub active: Option<Active>,
    /// What each member was last observed at, and whether it was healthy.
    pub members: BTreeMap<String, (Option<String>, bool)>,
    /// The failing gate, if one fails.
    pub gates_failing: Option<String>,
    /// Whether the windows let a batch start.
    pub windows_open: bool,
    /// Paused by a person.
    pub paused: bool,
    /// Whether this instance leads (not kept: a new leader learns it).
    #[serde(skip)]
    pub leading: bool,
}

impl State {
    /// A rollout that knows nothing yet; windows open until told otherwise.
    pub fn new() -> Self {
        Self { windows_open: true, ..Self::default() }
    }

    /// The revision `cluster` should run for the governed templates.
    pub fn target(&self, cluster: &str) -> Option<&str> {
        match &self.active {
            Some(active) if active.moved.contains(cluster) && !reverted(active) => Some(&active.revision),
            _ => self.last_good.as_deref(),
        }
    }

    /// Where the rollout stands.
    pub fn phase(&self) -> Phase {
        self.active.as_ref().map_or(Phase::Idle, |a| a.phase.clone())
    }

    /// Takes one event; returns what to send (the newest target per member).
    pub fn step(&mut self, settings: &Settings, event: Event) -> Vec<Action> {
        let mut out = Vec::new();
        let now = match event {
            Event::Revision { revision, batches, now } => {
                self.revision(revision, batches, now, &mut out);
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
                self.stop(&mut out);
                now
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
        if current == Some(&revision) {
            return;
        }
        if self.last_good.is_none() {
            // Nothing older to protect: the first revision goes everywhere.
            for cluster in batches.iter().flat_map(|b| &b.clusters) {
                out.push(Action::Target { cluster: cluster.clone(), revision: revision.clone() });
            }
            self.last_good = Some(revision);
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
        });
    }

    /// The phase the rollout moves to now, if it moves, doing what that takes.
    fn next_phase(&mut self, settings: &Settings, now: i64, out: &mut Vec<Action>) -> Option<Phase> {
        let active = self.active.as_ref()?;
        match active.phase.clone() {
            Phase::Idle | Phase::Halted { .. } => None,
            Phase::Waiting { batch } => {
                // The batch before must still stand when this one starts: one that
                // broke while this waited for a window is judged (and soaked) again.
                if batch > 0 && !self.pending(batch - 1).is_empty() {
                    return Some(Phase::Progressing { batch: batch - 1, since: active.batch_started });
                }
                if self.paused || !self.windows_open || !self.leading {
                    return None;
                }
                let active = self.active.as_mut()?;
                for cluster in &active.batches[batch].clusters {
                    active.moved.insert(cluster.clone());
                    out.push(Action::Target { cluster: cluster.clone(), revision: active.revision.clone() });
                }
                (active.failed, active.batch_started) = (BTreeSet::new(), now);
                Some(Phase::Progressing { batch, since: now })
            }
            Phase::Progressing { batch, since } => {
                let pending = self.pending(batch);
                if pending.is_empty() {
                    return Some(Phase::Soaking { batch, since: now });
                }
                if now - since < settings.progress_deadline_ms {
                    return None;
                }
                let active = self.active.as_mut()?;
                active.failed.extend(pending.iter().cloned());
                if active.failed.len() > settings.max_failures.floor_of(active.batches[batch].clusters.len()) {
                    let names: Vec<&str> = pending.iter().map(String::as_str).collect();
                    let reason = format!("{} not healthy at the revision by the progress deadline", names.join(", "));
                    self.halt(settings, batch, reason, out);
                    return None;
                }
                Some(Phase::Soaking { batch, since: now })
            }
            Phase::Soaking { batch, since } => {
                if let Some(gate) = self.gates_failing.clone() {
                    self.halt(settings, batch, format!("gate {gate}"), out);
                    return None;
                }
                if !self.pending(batch).is_empty() {
                    return Some(Phase::Progressing { batch, since: active.batch_started });
                }
                if now - since < settings.min_success_ms {
                    return None;
                }
                if batch + 1 < active.batches.len() {
                    return Some(Phase::Waiting { batch: batch + 1 });
                }
                self.last_good = self.active.take().map(|a| a.revision);
                None
            }
        }
    }

    /// Members of batch `batch` neither at the rollout's revision and healthy, nor
    /// counted as failed.
    fn pending(&self, batch: usize) -> BTreeSet<String> {
        let Some(active) = &self.active else { return BTreeSet::new() };
        let standing = |c: &String| {
            self.members.get(c).is_some_and(|(at, healthy)| *healthy && at.as_ref() == Some(&active.revision))
        };
        active.batches[batch].clusters.iter().filter(|c| !standing(c) && !active.failed.contains(*c)).cloned().collect()
    }

    fn halt(&mut self, settings: &Settings, batch: usize, reason: String, out: &mut Vec<Action>) {
        let revert = settings.on_failure == OnFailure::Revert;
        if revert {
            self.send_back(out);
        }
        if let Some(active) = &mut self.active {
            active.phase = Phase::Halted { batch, reason, reverted: revert };
        }
    }

    /// Sends the moved members back to the last good revision.
    fn send_back(&self, out: &mut Vec<Action>) {
        let (Some(active), Some(good)) = (&self.active, &self.last_good) else { return };
        if reverted(active) {
            return;
        }
        for cluster in &active.moved {
            out.push(Action::Target { cluster: cluster.clone(), revision: good.clone() });
        }
    }

    fn resume(&mut self, now: i64) {
        let Some(active) = &mut self.active else { return };
        let Phase::Halted { batch, reverted, .. } = active.phase else { return };
        if reverted {
            // Everything moved went back: the rollout starts over.
            active.moved.clear();
            active.phase = Phase::Waiting { batch: 0 };
        } else {
            // A person accepts where it stands: the batch is judged afresh from now.
            (active.failed, active.batch_started) = (BTreeSet::new(), now);
            active.phase = Phase::Progressing { batch, since: now };
        }
        self.gates_failing = None;
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

fn reverted(active: &Active) -> bool {
    matches!(active.phase, Phase::Halted { reverted: true, .. })
}

#[cfg(test)]
mod tests;
