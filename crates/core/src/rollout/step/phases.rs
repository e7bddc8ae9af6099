//! How a rollout moves from phase to phase: a batch starts, stands, soaks and is done,
//! or halts.

use std::collections::BTreeSet;

use super::{Action, Phase, Settings, State, Times, reverted};
use crate::model::rollout::OnFailure;

impl State {
    /// The phase the rollout moves to now, if it moves, doing what that takes.
    pub(super) fn next_phase(&mut self, settings: &Settings, now: i64, out: &mut Vec<Action>) -> Option<Phase> {
        match self.active.as_ref()?.phase.clone() {
            Phase::Idle | Phase::Halted { .. } => None,
            Phase::Waiting { batch } => self.waiting(batch, now, out),
            Phase::Progressing { batch, since } => self.progressing(settings, (batch, since), now, out),
            Phase::Soaking { batch, since } => self.soaking(settings, (batch, since), now, out),
        }
    }

    /// Batch `batch` starts, if the one before still stands, windows are open and
    /// nothing is paused.
    fn waiting(&mut self, batch: usize, now: i64, out: &mut Vec<Action>) -> Option<Phase> {
        // The batch before must still stand when this one starts: one that broke while
        // this waited for a window is judged (and soaked) again.
        if batch > 0 && !self.pending(batch - 1).is_empty() {
            return Some(Phase::Progressing { batch: batch - 1, since: self.active.as_ref()?.batch_started });
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
        *active.times(batch) = Times { started: now, ..Times::default() };
        Some(Phase::Progressing { batch, since: now })
    }

    /// Batch `batch` soaks once every member stands; at its deadline, those that do not
    /// count as failed, and more than `maxFailures` halt.
    fn progressing(
        &mut self,
        settings: &Settings,
        (batch, since): (usize, i64),
        now: i64,
        out: &mut Vec<Action>,
    ) -> Option<Phase> {
        let pending = self.pending(batch);
        if pending.is_empty() {
            self.active.as_mut()?.times(batch).soaking = Some(now);
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
        active.times(batch).soaking = Some(now);
        Some(Phase::Soaking { batch, since: now })
    }

    /// Batch `batch` is done after `minSuccessTime` standing with the gates passing; a
    /// failing gate halts, a member that stops standing sends it back to progressing.
    fn soaking(
        &mut self,
        settings: &Settings,
        (batch, since): (usize, i64),
        now: i64,
        out: &mut Vec<Action>,
    ) -> Option<Phase> {
        if let Some(gate) = self.gates_failing.clone() {
            self.halt(settings, batch, format!("gate {gate}"), out);
            return None;
        }
        if !self.pending(batch).is_empty() {
            let active = self.active.as_mut()?;
            active.times(batch).soaking = None;
            return Some(Phase::Progressing { batch, since: active.batch_started });
        }
        if now - since < settings.min_success_ms {
            return None;
        }
        let active = self.active.as_mut()?;
        active.times(batch).done = Some(now);
        if batch + 1 < active.batches.len() {
            return Some(Phase::Waiting { batch: batch + 1 });
        }
        let done = self.active.take()?;
        self.finished =
            Some(super::Finished { revision: done.revision.clone(), batches: done.batches, times: done.times });
        self.last_good = Some(done.revision);
        None
    }

    /// Members of batch `batch` neither at the rollout's revision and healthy, nor
    /// counted as failed.
    pub(super) fn pending(&self, batch: usize) -> BTreeSet<String> {
        let Some(active) = &self.active else { return BTreeSet::new() };
        let standing = |c: &String| {
            self.members.get(c).is_some_and(|(at, healthy)| *healthy && at.as_ref() == Some(&active.revision))
        };
        active.batches[batch].clusters.iter().filter(|c| !standing(c) && !active.failed.contains(*c)).cloned().collect()
    }

    pub(super) fn halt(&mut self, settings: &Settings, batch: usize, reason: String, out: &mut Vec<Action>) {
        let revert = settings.on_failure == OnFailure::Revert;
        if revert {
            self.send_back(out);
        }
        if let Some(active) = &mut self.active {
            active.phase = Phase::Halted { batch, reason, reverted: revert };
        }
    }

    /// Sends the moved members back to the last good revision.
    pub(super) fn send_back(&self, out: &mut Vec<Action>) {
        let (Some(active), Some(good)) = (&self.active, &self.last_good) else { return };
        if reverted(active) {
            return;
        }
        for cluster in &active.moved {
            out.push(Action::Target { cluster: cluster.clone(), revision: good.clone() });
        }
    }

    pub(super) fn resume(&mut self, now: i64) {
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
}
