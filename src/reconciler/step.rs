//! The reconcile loop's decision: from what the loop has learnt (a fetch, a finished
//! cycle, a change of leadership) to what it must do next. Pure: no I/O and no clock;
//! `now` comes with each event.
//!
//! | event                          | does                                                    |
//! |--------------------------------|---------------------------------------------------------|
//! | head fetched, not applied      | reconcile it ([`Why::New`], [`Why::Rewritten`])         |
//! | head fetched, not published    | reconcile it again ([`Why::Retry`]): the credentials    |
//! |                                | could not be read, or an agent's cluster is not its own |
//! | head fetched, failed to render | nothing, until resync is due: then the last good one    |
//! | head fetched, applied          | reconcile again when resync is due or a cycle is forced |
//! | fetch failed                   | when resync is due, the last good revision (drift is    |
//! |                                | corrected while the remote is down)                     |
//! | cycle done                     | remember what is published; forget dropped clusters     |
//!
//! A cycle renders and publishes; each member's worker converges on what is published
//! on its own, with its own retries (`crate::members::step`): one member failing never
//! makes the fleet retry, nor waits for it.
//! | leadership gained or lost      | forget what is applied and the last good revision: a    |
//! |                                | new leader applies afresh, and only what it rendered    |

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::git::Revision;

/// What the loop remembers between events.
#[derive(Debug, Clone)]
pub struct State {
    resync: Duration,
    /// Published to the members by the last cycle.
    applied: Option<Revision>,
    /// The last revision that rendered (applied to at least the clusters that answered).
    good: Option<Revision>,
    /// The last head that did not render, not retried until a resync is due.
    broken: Option<Revision>,
    last_cycle: Option<Instant>,
    /// The last cycle rendered but could not publish: `good` is retried at the next
    /// fetch rather than at resync.
    retry: bool,
    forced: bool,
    source_unavailable: Option<String>,
    /// A cycle rendered and published since this instance began to lead.
    cycled: bool,
    leading: bool,
    clusters: BTreeSet<String>,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The branch's head, and whether history was rewritten since the applied revision
    /// (asked of Git for [`State::applied`]).
    Fetched { head: Revision, rewritten: bool, now: Instant },
    /// The branch could not be fetched.
    FetchFailed { reason: String, now: Instant },
    /// Reconcile at the next occasion even if Git did not move (replica state changed).
    Forced,
    /// Leadership changed.
    Leading(bool),
    /// A cycle finished (or was cut short by losing the lease or stopping).
    Cycled { revision: Revision, outcome: Outcome, now: Instant },
}

/// How a cycle ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Rendered and published to the members; `clusters` are all the clusters the
    /// revision declares.
    Published { clusters: BTreeSet<String> },
    /// Rendered, but not published: the member credentials could not be read, or an
    /// agent's cluster is not declared as its own.
    NotPublished { clusters: BTreeSet<String> },
    /// The revision did not render; nothing was applied.
    RenderFailed,
    /// Stopped before it finished.
    Cancelled,
}

/// Why a revision is reconciled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// A revision not applied yet.
    New,
    /// History was rewritten (force-push, reset): the new head, though it does not
    /// descend from what is applied.
    Rewritten { previous: Revision },
    /// The revision rendered last, again: it could not be published.
    Retry,
    /// The resync period passed (drift correction).
    Resync,
    /// A cycle was asked for.
    Forced,
    /// The branch cannot be fetched: the last good revision, on the resync period.
    SourceUnavailable,
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Render and reconcile this revision.
    Reconcile { revision: Revision, why: Why },
    /// The branch could not be fetched (said once, when it starts).
    SourceLost(String),
    /// The branch can be fetched again.
    SourceBack,
    /// Drop what is kept for a cluster the repository no longer declares.
    ForgetCluster(String),
}

impl State {
    /// Nothing applied yet; reconcile at least every `resync`.
    pub fn new(resync: Duration) -> Self {
        Self {
            resync,
            applied: None,
            good: None,
            broken: None,
            last_cycle: None,
            retry: false,
            forced: false,
            source_unavailable: None,
            cycled: false,
            leading: false,
            clusters: BTreeSet::new(),
        }
    }

    /// The revision the last cycle published.
    pub fn applied(&self) -> Option<Revision> {
        self.applied
    }

    /// Why the branch cannot be fetched, while it cannot.
    pub fn source_unavailable(&self) -> Option<&str> {
        self.source_unavailable.as_deref()
    }

    /// Ready (the fleet's half): leading, the branch reachable, and a revision published
    /// since leading began.
    pub fn ready(&self) -> bool {
        self.leading && self.source_unavailable.is_none() && self.cycled
    }

    fn due(&self, now: Instant) -> bool {
        self.until_resync(now).is_zero()
    }

    /// How long until a resync is due (zero when it is): the loop sleeps no longer than
    /// this, so drift is corrected every `resync` even when fetches are hours apart
    /// (webhooks announcing pushes, `--interval 1h`).
    pub fn until_resync(&self, now: Instant) -> Duration {
        self.last_cycle.map_or(Duration::ZERO, |t| self.resync.saturating_sub(now.saturating_duration_since(t)))
    }

    /// Takes one event; returns what to do.
    pub fn step(&mut self, event: Event) -> Vec<Action> {
        match event {
            Event::Fetched { head, rewritten, now } => self.fetched(head, rewritten, now),
            Event::FetchFailed { reason, now } => self.fetch_failed(reason, now),
            Event::Forced => {
                self.forced = true;
                Vec::new()
            }
            Event::Leading(leading) => {
                self.leading = leading;
                // A new leader applies afresh; one that lost the lease must not think
                // what it had applied is still current when it leads again. Nor that
                // its last good revision is: another leader may have applied newer ones
                // meanwhile, and re-applying an old one would prune what they added. A
                // new leader whose head does not render applies nothing until one does.
                self.applied = None;
                self.good = None;
                self.last_cycle = None;
                self.retry = false;
                self.cycled = false;
                Vec::new()
            }
            Event::Cycled { revision, outcome, now } => self.cycled(revision, outcome, now),
        }
    }

    fn fetched(&mut self, head: Revision, rewritten: bool, now: Instant) -> Vec<Action> {
        let mut actions = Vec::new();
        if self.source_unavailable.take().is_some() {
            actions.push(Action::SourceBack);
        }
        let (due, forced) = (self.due(now), std::mem::take(&mut self.forced));
        let why = match self.applied {
            Some(applied) if applied == head && forced => Why::Forced,
            Some(applied) if applied == head && due => Why::Resync,
            Some(applied) if applied == head => return actions,
            // A head that did not render is not rendered again at every fetch (a
            // force-pushed one is "rewritten" at each), only the last good one on resync.
            _ if self.broken == Some(head) && !(due || forced) => return actions,
            _ if self.broken == Some(head) => return self.resync_good(actions, Why::Resync),
            Some(previous) if rewritten => Why::Rewritten { previous },
            _ if self.retry && self.good == Some(head) => Why::Retry,
            _ => Why::New,
        };
        actions.push(Action::Reconcile { revision: head, why });
        actions
    }

    /// The head does not render or cannot be fetched: reconcile the last good revision.
    fn resync_good(&self, mut actions: Vec<Action>, why: Why) -> Vec<Action> {
        if let Some(revision) = self.good {
            actions.push(Action::Reconcile { revision, why });
        }
        actions
    }

    fn fetch_failed(&mut self, reason: String, now: Instant) -> Vec<Action> {
        let mut actions = Vec::new();
        if self.source_unavailable.is_none() {
            actions.push(Action::SourceLost(reason.clone()));
        }
        self.source_unavailable = Some(reason);
        // A cycle asked for is owed once: this one pays it, due or not.
        let forced = std::mem::take(&mut self.forced);
        if self.due(now) || forced {
            return self.resync_good(actions, Why::SourceUnavailable);
        }
        actions
    }

    fn cycled(&mut self, revision: Revision, outcome: Outcome, now: Instant) -> Vec<Action> {
        let (clusters, published) = match outcome {
            Outcome::Published { clusters } => (clusters, true),
            Outcome::NotPublished { clusters } => (clusters, false),
            Outcome::RenderFailed => {
                self.last_cycle = Some(now);
                self.broken = Some(revision);
                return Vec::new();
            }
            Outcome::Cancelled => return Vec::new(),
        };
        self.last_cycle = Some(now);
        self.cycled |= published;
        self.good = Some(revision);
        self.broken = None;
        // Not published (credentials unreadable): tried again at the next fetch, as
        // Flux retries a failed Kustomization; not left to resync.
        self.retry = !published;
        self.applied = published.then_some(revision);
        let dropped = self.clusters.difference(&clusters).cloned().map(Action::ForgetCluster).collect();
        self.clusters = clusters;
        dropped
    }
}

#[cfg(test)]
mod properties;

#[cfg(test)]
mod tests {
    use super::*;

    fn rev(n: u8) -> Revision {
        Revision::from_bytes(&[n; 20]).unwrap()
    }

    fn clusters(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    /// A leader that applied `rev(1)` to member1 and member2 at `t0`.
    fn applied(t0: Instant) -> State {
        let mut state = State::new(Duration::from_secs(300));
        state.step(Event::Leading(true));
        let actions = state.step(Event::Fetched { head: rev(1), rewritten: false, now: t0 });
        assert_eq!(actions, [Action::Reconcile { revision: rev(1), why: Why::New }]);
        let ran = Outcome::Published { clusters: clusters(&["member1", "member2"]) };
        assert!(state.step(Event::Cycled { revision: rev(1), outcome: ran, now: t0 }).is_empty());
        assert!(state.ready());
        state
    }

    fn fetched(state: &mut State, head: Revision, now: Instant) -> Vec<Action> {
        state.step(Event::Fetched { head, rewritten: false, now })
    }

    #[test]
    fn a_new_revision_is_reconciled_once() {
        let t0 = Instant::now();
        let mut state = applied(t0);
        assert!(fetched(&mut state, rev(1), t0 + Duration::from_secs(1)).is_empty(), "nothing new");
        assert_eq!(
            fetched(&mut state, rev(2), t0 + Duration::from_secs(2)),
            [Action::Reconcile { revision: rev(2), why: Why::New }]
        );
    }

    #[test]
    fn a_rewritten_branch_is_applied_and_said_so() {
        let t0 = Instant::now();
        let mut state = applied(t0);
        let actions = state.step(Event::Fetched { head: rev(9), rewritten: true, now: t0 });
        assert_eq!(actions, [Action::Reconcile { revision: rev(9), why: Why::Rewritten { previous: rev(1) } }]);
    }

    #[test]
    fn resync_reconciles_the_applied_revision_when_due() {
        let t0 = Instant::now();
        let mut state = applied(t0);
        assert!(fetched(&mut state, rev(1), t0 + Duration::from_secs(299)).is_empty());
        assert_eq!(
            fetched(&mut state, rev(1), t0 + Duration::from_secs(300)),
            [Action::Reconcile { revision: rev(1), why: Why::Resync }]
        );
    }

    #[test]
    fn the_loop_is_told_when_the_next_resync_is_due() {
        let t0 = Instant::now();
        assert_eq!(State::new(Duration::from_secs(300)).until_resync(t0), Duration::ZERO, "nothing applied yet");
        let state = applied(t0);
        assert_eq!(state.until_resync(t0 + Duration::from_secs(100)), Duration::from_secs(200));
        assert_eq!(state.until_resync(t0 + Duration::from_secs(400)), Duration::ZERO);
    }

    #[test]
    fn a_forced_cycle_runs_without_a_new_revision() {
        let t0 = Instant::now();
        let mut state = applied(t0);
        state.step(Event::Forced);
        assert_eq!(fetched(&mut state, rev(1), t0), [Action::Reconcile { revision: rev(1), why: Why::Forced }]);
        assert!(fetched(&mut state, rev(1), t0).is_empty(), "forcing is used up");
    }

    #[test]
    fn a_force_pushed_head_that_does_not_render_is_not_rendered_again_at_every_fetch() {
        let t0 = Instant::now();
        let mut state = applied(t0);
        let rewritten = |state: &mut State, now| state.step(Event::Fetched { head: rev(2), rewritten: true, now });
        let previous = rev(1);
        assert_eq!(
            rewritten(&mut state, t0),
            [Action::Reconcile { revision: rev(2), why: Why::Rewritten { previous } }]
        );
        state.step(Event::Cycled { revision: rev(2), outcome: Outcome::RenderFailed, now: t0 });
        assert!(rewritten(&mut state, t0 + Duration::from_secs(1)).is_empty(), "found by the property test");
        assert_eq!(
            rewritten(&mut state, t0 + Duration::from_secs(300)),
            [Action::Reconcile { revision: rev(1), why: Why::Resync }]
        );
    }

    #[test]
    fn a_head_that_does_not_render_waits_for_resync_which_reapplies_the_last_good_revision() {
        let t0 = Instant::now();
        let mut state = applied(t0);
        assert_eq!(fetched(&mut state, rev(2), t0), [Action::Reconcile { revision: rev(2), why: Why::New }]);
        state.step(Event::Cycled { revision: rev(2), outcome: Outcome::RenderFailed, now: t0 });
        assert!(fetched(&mut state, rev(2), t0 + Duration::from_secs(10)).is_empty(), "not rendered again");
        assert_eq!(
            fetched(&mut state, rev(2), t0 + Duration::from_secs(300)),
            [Action::Reconcile { revision: rev(1), why: Why::Resync }],
            "drift is corrected with the last good revision"
        );
        assert_eq!(
            fetched(&mut state, rev(3), t0 + Duration::from_secs(301)),
            [Action::Reconcile { revision: rev(3), why: Why::New }],
            "a fix is picked up at once"
        );
    }

    #[test]
    fn while_the_source_is_down_the_last_good_revision_is_resynced_and_readiness_drops() {
        let t0 = Instant::now();
        let mut state = applied(t0);
        let down = |state: &mut State, secs| {
            state.step(Event::FetchFailed { reason: "connection refused".into(), now: t0 + Duration::from_secs(secs) })
        };
        assert_eq!(down(&mut state, 10), [Action::SourceLost("connection refused".into())]);
        assert!(!state.ready());
        assert_eq!(state.source_unavailable(), Some("connection refused"));
        assert!(down(&mut state, 20).is_empty(), "said once");
        assert_eq!(down(&mut state, 300), [Action::Reconcile { revision: rev(1), why: Why::SourceUnavailable }]);
        let ran = Outcome::Published { clusters: clusters(&["member1", "member2"]) };
        state.step(Event::Cycled { revision: rev(1), outcome: ran, now: t0 + Duration::from_secs(300) });
        assert!(down(&mut state, 310).is_empty(), "not again until the next resync");
        assert_eq!(fetched(&mut state, rev(1), t0 + Duration::from_secs(311)), [Action::SourceBack]);
        assert!(state.ready());
    }

    #[test]
    fn a_revision_that_could_not_be_published_is_retried_at_the_next_fetch() {
        let t0 = Instant::now();
        let mut state = State::new(Duration::from_secs(300));
        state.step(Event::Leading(true));
        fetched(&mut state, rev(1), t0);
        let unpublished = Outcome::NotPublished { clusters: clusters(&["member1"]) };
        state.step(Event::Cycled { revision: rev(1), outcome: unpublished, now: t0 });
        assert!(!state.ready(), "nothing published yet");
        assert_eq!(state.applied(), None);
        let again = [Action::Reconcile { revision: rev(1), why: Why::Retry }];
        assert_eq!(fetched(&mut state, rev(1), t0 + Duration::from_secs(5)), again, "long before resync");
        let published = Outcome::Published { clusters: clusters(&["member1"]) };
        state.step(Event::Cycled { revision: rev(1), outcome: published, now: t0 + Duration::from_secs(5) });
        assert!(state.ready());
        assert!(fetched(&mut state, rev(1), t0 + Duration::from_secs(10)).is_empty(), "done until resync");
        assert_eq!(
            fetched(&mut state, rev(2), t0 + Duration::from_secs(11)),
            [Action::Reconcile { revision: rev(2), why: Why::New }],
            "a new head is new, not a retry"
        );
    }

    #[test]
    fn losing_the_lease_mid_cycle_forgets_what_was_applied() {
        let t0 = Instant::now();
        let mut state = applied(t0);
        fetched(&mut state, rev(2), t0);
        state.step(Event::Leading(false));
        state.step(Event::Cycled { revision: rev(2), outcome: Outcome::Cancelled, now: t0 });
        assert!(!state.ready());
        assert_eq!(state.applied(), None);
        state.step(Event::Leading(true));
        assert_eq!(
            fetched(&mut state, rev(1), t0 + Duration::from_secs(5)),
            [Action::Reconcile { revision: rev(1), why: Why::New }],
            "a new leader applies afresh"
        );
    }

    #[test]
    fn a_dropped_cluster_is_forgotten() {
        let t0 = Instant::now();
        let mut state = applied(t0);
        fetched(&mut state, rev(2), t0);
        let ran = Outcome::Published { clusters: clusters(&["member1"]) };
        let actions = state.step(Event::Cycled { revision: rev(2), outcome: ran, now: t0 });
        assert_eq!(actions, [Action::ForgetCluster("member2".into())]);
    }
}
