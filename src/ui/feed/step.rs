//! The feed's decision, pure: when to publish a new snapshot of the fleet page and when
//! to read the members again. At most one reading is in flight (a slow member delays
//! the next reading, never stacks them); a render while one is in flight is read again
//! as soon as it ends, so the page never settles on observations of an older plan.

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The reconcile loop rendered a new plan.
    Rendered,
    /// The controller's status (`/status`) changed.
    StatusChanged,
    /// The reading interval elapsed.
    Due,
    /// The reading in flight finished (each member read or failed).
    Observed,
}

/// What to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Build the snapshot from the newest plan, status and observations, and hand it to
    /// every open page.
    Publish,
    /// Read every member the newest plan places objects in.
    Observe,
}

/// Where the feed stands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct State {
    /// A plan has been rendered (nothing to read before).
    rendered: bool,
    /// A reading is in flight.
    observing: bool,
    /// A render arrived while it was: read again when it ends.
    stale: bool,
}

#[cfg(test)]
impl State {
    /// Whether a reading is in flight.
    pub fn observing(&self) -> bool {
        self.observing
    }
}

/// The next actions after `event`.
pub fn step(state: &mut State, event: Event) -> Vec<Action> {
    match event {
        // A new plan shows at once (its desired replicas, the last observations); its
        // members are read next, or after the reading in flight.
        Event::Rendered => {
            state.rendered = true;
            let mut actions = vec![Action::Publish];
            if state.observing {
                state.stale = true;
            } else {
                actions.extend(observe(state));
            }
            actions
        }
        Event::StatusChanged => vec![Action::Publish],
        Event::Due if state.rendered && !state.observing => observe(state).into_iter().collect(),
        Event::Due => Vec::new(),
        Event::Observed => {
            state.observing = false;
            let mut actions = vec![Action::Publish];
            if std::mem::take(&mut state.stale) {
                actions.extend(observe(state));
            }
            actions
        }
    }
}

fn observe(state: &mut State) -> Option<Action> {
    state.observing = true;
    Some(Action::Observe)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn run(events: &[Event]) -> Vec<Vec<Action>> {
        let mut state = State::default();
        events.iter().map(|e| step(&mut state, *e)).collect()
    }

    #[test]
    fn nothing_is_read_before_a_plan() {
        assert_eq!(run(&[Event::Due, Event::StatusChanged, Event::Due]), [vec![], vec![Action::Publish], vec![]]);
    }

    #[test]
    fn a_render_publishes_at_once_then_reads() {
        assert_eq!(run(&[Event::Rendered]), [vec![Action::Publish, Action::Observe]]);
    }

    #[test]
    fn a_render_during_a_reading_is_read_once_it_ends() {
        let got = run(&[Event::Rendered, Event::Rendered, Event::Due, Event::Observed, Event::Observed]);
        assert_eq!(
            got,
            [
                vec![Action::Publish, Action::Observe],
                vec![Action::Publish],
                vec![],
                vec![Action::Publish, Action::Observe],
                vec![Action::Publish],
            ]
        );
    }

    fn event() -> impl Strategy<Value = Event> {
        prop_oneof![Just(Event::Rendered), Just(Event::StatusChanged), Just(Event::Due), Just(Event::Observed)]
    }

    proptest! {
        /// Over any sequence (an `Observed` arrives only while a reading is in flight, as
        /// the executor sends it): never two readings in flight, nothing read before a
        /// plan, every render and status change published at once, and the newest plan
        /// is always read in the end.
        #[test]
        fn readings_never_stack_and_the_newest_plan_is_read(events in proptest::collection::vec(event(), 0..60)) {
            let mut state = State::default();
            let (mut in_flight, mut rendered) = (0u32, false);
            // Whether a reading began after the newest render.
            let mut newest_read = true;
            let apply = |state: &mut State, event: Event, in_flight: &mut u32, newest_read: &mut bool, rendered: &mut bool| -> Result<(), TestCaseError> {
                if event == Event::Observed {
                    *in_flight -= 1;
                }
                if event == Event::Rendered {
                    *rendered = true;
                    *newest_read = false;
                }
                let actions = step(state, event);
                if matches!(event, Event::Rendered | Event::StatusChanged | Event::Observed) {
                    prop_assert_eq!(actions.first(), Some(&Action::Publish));
                }
                for action in actions {
                    if action == Action::Observe {
                        prop_assert!(*rendered, "a reading before any plan");
                        *in_flight += 1;
                        *newest_read = true;
                    }
                }
                prop_assert!(*in_flight <= 1, "two readings in flight");
                prop_assert_eq!(state.observing(), *in_flight == 1);
                Ok(())
            };
            for event in events {
                if event == Event::Observed && in_flight == 0 {
                    continue;
                }
                apply(&mut state, event, &mut in_flight, &mut newest_read, &mut rendered)?;
            }
            // Let every reading finish: the newest plan has been read.
            while in_flight > 0 {
                apply(&mut state, Event::Observed, &mut in_flight, &mut newest_read, &mut rendered)?;
            }
            prop_assert!(newest_read, "the newest plan was never read");
        }
    }
}
