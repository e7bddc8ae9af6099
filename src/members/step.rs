//! One member's decision: from what its worker learns (a new target, the member's
//! health, the lease, an attempt's end, the clock) to what the worker does next. Pure:
//! no I/O and no clock; `now` comes with each event.
//!
//! | event                         | does                                                      |
//! |-------------------------------|-----------------------------------------------------------|
//! | a new target                  | cancel an attempt at an older one, forget its retries,    |
//! |                               | start on the new one (at most one request timeout late)   |
//! | the member turns not Ready    | cancel the attempt in flight; contact nothing until Ready |
//! | the member is Ready again     | try at once                                               |
//! | the lease is lost or gained   | cancel the attempt in flight; forget the target: a new    |
//! |                               | leader applies what it publishes from a fresh fetch       |
//! | a target while not leading    | ignored: it was published before the lease was lost       |
//! | an attempt ends, complete     | the target is applied; no retry                           |
//! | an attempt ends, objects      | the target is applied (the revision is there), and the    |
//! | refused (a kind not served)   | refused objects are retried after the backoff             |
//! | an attempt fails              | retry after a backoff of 1, 2, 4 … 60 s (capped), as long |
//! |                               | as the target stands                                      |
//! | the clock passes a retry time | start again                                               |
//!
//! Invariants (property-tested): at most one attempt in flight; nothing is started
//! without the lease or while the member is not Ready; the applied generation never
//! goes back; a Ready member under a leader always starts on its newest target.

use std::time::{Duration, Instant};

use crate::git::Revision;

/// The longest wait between two attempts at one target.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// A target: the fleet's `generation`-th publication, of `revision`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Goal {
    /// Increases with every publication (a resync republishes the same revision).
    pub generation: u64,
    /// The revision to converge on.
    pub revision: Revision,
}

/// Where a member stands, as `/status` and the metrics show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Nothing to do yet: no target.
    Idle,
    /// The newest target is applied.
    Current,
    /// An attempt at the newest target is in flight (and none has failed yet).
    Converging,
    /// The newest target is applied, but objects the member refused are retried.
    Incomplete {
        /// When the first refusal at this target happened.
        since: Instant,
        /// The last attempt's reason.
        reason: String,
    },
    /// Attempts at the newest target failed; the next is due at the retry time.
    Failing {
        /// When the first failure at this target happened.
        since: Instant,
        /// The last failure's reason.
        reason: String,
    },
    /// The member is not Ready (its health taint): not contacted.
    NotContacted,
    /// This instance does not lead: it writes nothing.
    StandingBy,
}

/// What the worker remembers between events.
#[derive(Debug, Clone)]
pub struct State {
    target: Option<Goal>,
    /// The generation of the attempt in flight.
    running: Option<u64>,
    applied: Option<Goal>,
    /// Objects of the applied target were refused: retried.
    incomplete: bool,
    ready: bool,
    leading: bool,
    /// Consecutive failed attempts at the current target.
    failures: u32,
    retry_at: Option<Instant>,
    failing: Option<(Instant, String)>,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The fleet published a new target.
    Target(Goal),
    /// The member's health: Ready or not.
    Ready(bool),
    /// Whether this instance leads.
    Leading(bool),
    /// The attempt at `generation` ended.
    Finished { generation: u64, result: Attempted, now: Instant },
    /// Time passed (a retry may be due).
    Tick(Instant),
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempted {
    /// Everything applied.
    Applied,
    /// The member was reconciled, but refused some objects (why).
    Partly(String),
    /// The member could not be reconciled (why).
    Failed(String),
}

/// What to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Start an attempt at this target.
    Start(Goal),
    /// Drop the attempt in flight: nothing more of it is sent.
    Cancel,
}

impl Default for State {
    fn default() -> Self {
        Self::new()
    }
}

impl State {
    /// Nothing known: no target, not Ready until told, not leading.
    pub fn new() -> Self {
        Self {
            target: None,
            running: None,
            applied: None,
            incomplete: false,
            ready: true,
            leading: false,
            failures: 0,
            retry_at: None,
            failing: None,
        }
    }

    /// The target last applied completely.
    pub fn applied(&self) -> Option<Goal> {
        self.applied
    }

    /// The newest target.
    pub fn target(&self) -> Option<Goal> {
        self.target
    }

    /// Failed attempts at the current target, in a row.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// When the next attempt is due, if one waits for the clock.
    pub fn retry_at(&self) -> Option<Instant> {
        self.retry_at.filter(|_| self.running.is_none() && self.wants_work())
    }

    /// Whether an attempt is in flight.
    #[cfg(test)]
    pub fn running(&self) -> bool {
        self.running.is_some()
    }

    /// Where the member stands.
    pub fn phase(&self) -> Phase {
        match (self.leading, self.ready, self.target) {
            (false, _, _) => Phase::StandingBy,
            (_, false, _) => Phase::NotContacted,
            (_, _, None) => Phase::Idle,
            _ if !self.wants_work() => Phase::Current,
            _ if self.incomplete && self.applied == self.target => {
                let (since, reason) = self.failing.clone().expect("refusals are recorded");
                Phase::Incomplete { since, reason }
            }
            _ => match &self.failing {
                Some((since, reason)) => Phase::Failing { since: *since, reason: reason.clone() },
                None => Phase::Converging,
            },
        }
    }

    /// A target that is not applied yet, or applied with refused objects.
    fn wants_work(&self) -> bool {
        self.target.is_some_and(|t| self.applied.is_none_or(|a| a.generation < t.generation))
            || (self.incomplete && self.applied == self.target)
    }

    /// Takes one event; returns what to do.
    pub fn step(&mut self, event: Event) -> Vec<Action> {
        let mut actions = Vec::new();
        let now = match event {
            Event::Target(goal) => {
                // A target that reaches a standby was published before the lease was
                // lost: applied after the lease comes back, it could undo what another
                // leader applied meanwhile. The new term publishes afresh.
                if !self.leading || self.target.is_some_and(|t| t.generation >= goal.generation) {
                    return actions;
                }
                self.target = Some(goal);
                // A new target preempts the retries of the old one.
                (self.failures, self.retry_at, self.failing, self.incomplete) = (0, None, None, false);
                self.cancel(&mut actions);
                None
            }
            Event::Ready(ready) => {
                if !ready {
                    self.cancel(&mut actions);
                } else if !self.ready {
                    // Back: tried at once, not after the backoff its outage built up.
                    self.retry_at = None;
                }
                self.ready = ready;
                None
            }
            Event::Leading(leading) => {
                self.leading = leading;
                self.cancel(&mut actions);
                // A new leader applies afresh, at once; but only what it publishes from
                // a fresh fetch: a target kept from before may be older than what
                // another leader applied meanwhile.
                (self.applied, self.retry_at, self.failing, self.failures) = (None, None, None, 0);
                self.incomplete = false;
                if !leading {
                    self.target = None;
                }
                None
            }
            Event::Finished { generation, result, now } => {
                if self.running != Some(generation) {
                    return actions;
                }
                self.running = None;
                self.finished(generation, result, now);
                Some(now)
            }
            Event::Tick(now) => Some(now),
        };
        self.start_if_due(now, &mut actions);
        actions
    }

    fn cancel(&mut self, actions: &mut Vec<Action>) {
        if self.running.take().is_some() {
            actions.push(Action::Cancel);
        }
    }

    fn finished(&mut self, generation: u64, result: Attempted, now: Instant) {
        let Some(goal) = self.target.filter(|t| t.generation == generation) else {
            // An attempt at a target since replaced: its outcome decides nothing.
            return;
        };
        let reason = match result {
            Attempted::Applied => {
                self.apply(goal);
                (self.failures, self.retry_at, self.failing, self.incomplete) = (0, None, None, false);
                return;
            }
            Attempted::Partly(reason) => {
                // The revision is there: applied, with the refused objects retried.
                self.apply(goal);
                self.incomplete = true;
                reason
            }
            Attempted::Failed(reason) => reason,
        };
        self.failures = self.failures.saturating_add(1);
        self.retry_at = Some(now + backoff(self.failures));
        let since = self.failing.as_ref().map_or(now, |(since, _)| *since);
        self.failing = Some((since, reason));
    }

    /// `goal` is applied, unless a newer one already is.
    fn apply(&mut self, goal: Goal) {
        if self.applied.is_none_or(|a| a.generation < goal.generation) {
            self.applied = Some(goal);
        }
    }

    /// Starts on the newest target when nothing is in flight, the member is Ready, this
    /// instance leads, and no retry is waiting for a later time than `now` (`None`: an
    /// event that is not about time, which never waits out a retry).
    fn start_if_due(&mut self, now: Option<Instant>, actions: &mut Vec<Action>) {
        let due = match (self.retry_at, now) {
            (None, _) => true,
            (Some(at), Some(now)) => now >= at,
            (Some(_), None) => false,
        };
        if self.leading && self.ready && self.running.is_none() && self.wants_work() && due {
            let goal = self.target.expect("wants work");
            self.running = Some(goal.generation);
            actions.push(Action::Start(goal));
        }
    }
}

/// The wait after `failures` failed attempts: 1, 2, 4 … seconds, at most [`MAX_BACKOFF`].
pub fn backoff(failures: u32) -> Duration {
    Duration::from_secs(1u64 << failures.saturating_sub(1).min(6)).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests;
