//! The reconcile decision over random histories of fetches (heads 1..=4, of which 3
//! never renders), fetch failures, forced cycles, leadership changes and time. As in the
//! loop, a cycle runs when the decision asks for one, and its outcome is the next event.

use proptest::prelude::*;

use super::*;

/// The revision that never renders.
const BROKEN: u8 = 3;

fn rev(n: u8) -> Revision {
    Revision::from_bytes(&[n; 20]).unwrap()
}

#[derive(Debug, Clone)]
enum Random {
    Fetched(u8, bool),
    FetchFailed,
    Forced,
    Leading(bool),
    /// The next cycle is not published (the member credentials cannot be read).
    Unpublished,
    Wait(u64),
}

fn history() -> impl Strategy<Value = Vec<Random>> {
    let step = prop_oneof![
        6 => (1u8..=4, proptest::bool::weighted(0.1)).prop_map(|(n, rewritten)| Random::Fetched(n, rewritten)),
        2 => Just(Random::FetchFailed),
        1 => Just(Random::Forced),
        1 => proptest::bool::weighted(0.8).prop_map(Random::Leading),
        1 => Just(Random::Unpublished),
        4 => (0u64..200).prop_map(Random::Wait),
    ];
    proptest::collection::vec(step, 1..150)
}

/// What the history has done so far, as the rules need it.
struct Model {
    resync: Duration,
    now: Instant,
    /// The last revision that rendered.
    good: Option<Revision>,
    /// The last revision tried, when it did not render.
    failed_last: Option<Revision>,
    last_cycle: Option<Instant>,
    /// A forced cycle is owed.
    forced: bool,
    unpublished_next: bool,
}

/// What was true just before an event, for judging the decision it led to.
struct Before {
    applied: Option<Revision>,
    retry: bool,
    due: bool,
    forced: bool,
    fetched: Option<Revision>,
    failing: bool,
}

impl Model {
    /// The event a step of the history is, and the head it fetched, if any.
    fn event(&mut self, step: Random) -> Option<(Event, Option<Revision>)> {
        let now = self.now;
        Some(match step {
            Random::Fetched(n, rewritten) => (Event::Fetched { head: rev(n), rewritten, now }, Some(rev(n))),
            Random::FetchFailed => (Event::FetchFailed { reason: "down".into(), now }, None),
            Random::Forced => {
                self.forced = true;
                (Event::Forced, None)
            }
            Random::Leading(lead) => {
                // Gained or lost, the lease starts afresh, and a last good revision from
                // before it may be older than what another leader applied meanwhile.
                self.last_cycle = None;
                self.good = None;
                (Event::Leading(lead), None)
            }
            Random::Unpublished => {
                self.unpublished_next = true;
                return None;
            }
            Random::Wait(s) => {
                self.now += Duration::from_secs(s);
                return None;
            }
        })
    }

    /// Checks a cycle the decision asked for against the rules, then runs it: its outcome.
    fn cycle(&mut self, revision: Revision, why: Why, before: &Before) -> Result<Outcome, TestCaseError> {
        if before.failing {
            prop_assert_eq!(Some(revision), self.good, "only the last good revision while the branch is down");
            prop_assert!(before.due || before.forced, "a cycle while the branch is down, neither due nor forced");
        } else {
            let known = Some(revision) == before.fetched || Some(revision) == self.good;
            prop_assert!(known, "{:?} is neither the head nor the last good one", revision);
        }
        let again = Some(revision) == self.failed_last;
        prop_assert!(!again, "{:?} did not render and was tried again before another rendered ({:?})", revision, why);
        if Some(revision) == before.applied && revision == before.fetched.unwrap_or(revision) {
            let cause = before.due || before.forced || before.retry;
            prop_assert!(cause, "an applied head reconciled again without cause ({:?})", why);
        }
        self.forced = false;
        self.last_cycle = Some(self.now);
        if revision == rev(BROKEN) {
            self.failed_last = Some(revision);
            return Ok(Outcome::RenderFailed);
        }
        (self.failed_last, self.good) = (None, Some(revision));
        let clusters = ["member1".to_owned()].into();
        Ok(match std::mem::take(&mut self.unpublished_next) {
            true => Outcome::NotPublished { clusters },
            false => Outcome::Published { clusters },
        })
    }
}

proptest! {
    /// A new head that is not known broken is reconciled at once; only revisions that
    /// rendered since this instance began to lead are reconciled again; a revision that did
    /// not render is not tried again until another revision has rendered; while the
    /// branch cannot be fetched only the last good revision is reconciled, and only when
    /// a resync is due or a cycle was forced; an applied head is reconciled again only
    /// for a resync that is due, a forced cycle, or a retry of an unpublished one.
    #[test]
    fn the_reconcile_decision_keeps_its_rules_over_random_histories(history in history()) {
        let resync = Duration::from_secs(300);
        let mut state = State::new(resync);
        let mut model = Model {
            resync, now: Instant::now(), good: None, failed_last: None, last_cycle: None, forced: false, unpublished_next: false,
        };
        state.step(Event::Leading(true));
        for step_ in history {
            let Some((event, fetched)) = model.event(step_) else { continue };
            let before = Before {
                applied: state.applied(),
                retry: state.retry,
                due: model.last_cycle.is_none_or(|t| model.now.duration_since(t) >= model.resync),
                forced: model.forced,
                fetched,
                failing: matches!(event, Event::FetchFailed { .. }),
            };
            // A forced cycle is owed until a fetch (or a cycle while the branch is down).
            model.forced &= !matches!(event, Event::Fetched { .. });
            for action in state.step(event) {
                let Action::Reconcile { revision, why } = action else { continue };
                let outcome = model.cycle(revision, why, &before)?;
                state.step(Event::Cycled { revision, outcome, now: model.now });
            }
            if let Some(head) = fetched.filter(|h| *h != rev(BROKEN) && before.applied != Some(*h)) {
                let reconciled = state.applied().is_some_and(|a| a == head) || state.retry;
                prop_assert!(reconciled, "new head {:?} not reconciled", head);
            }
        }
    }
}
