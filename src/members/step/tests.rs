use proptest::prelude::*;

use super::*;

fn rev(n: u8) -> Revision {
    Revision::from_bytes(&[n; 20]).unwrap()
}

fn goal(generation: u64) -> Goal {
    Goal { generation, revision: rev(generation as u8) }
}

/// A Ready member under a leader, with target 1 in flight.
fn started(t0: Instant) -> State {
    let mut s = State::new();
    assert!(s.step(Event::Leading(true)).is_empty());
    assert_eq!(s.step(Event::Target(goal(1))), [Action::Start(goal(1))]);
    assert_eq!(s.phase(), Phase::Converging);
    let _ = t0;
    s
}

#[test]
fn a_target_is_applied_once_and_the_member_is_current() {
    let t0 = Instant::now();
    let mut s = started(t0);
    assert!(s.step(Event::Finished { generation: 1, result: Attempted::Applied, now: t0 }).is_empty());
    assert_eq!((s.applied(), s.phase()), (Some(goal(1)), Phase::Current));
    assert!(s.step(Event::Tick(t0 + Duration::from_secs(600))).is_empty(), "nothing more to do");
}

#[test]
fn a_new_target_preempts_the_attempt_and_the_retries_of_the_old_one() {
    let t0 = Instant::now();
    let mut s = started(t0);
    // Stuck on 1: a new target cancels the attempt in flight and starts at once.
    assert_eq!(s.step(Event::Target(goal(2))), [Action::Cancel, Action::Start(goal(2))]);
    assert!(s.step(Event::Finished { generation: 1, result: Attempted::Applied, now: t0 }).is_empty(), "a stale end");
    assert_eq!(s.applied(), None, "1 was cancelled, not applied");
    // Failing on 2, waiting out a backoff: 3 does not wait for it.
    s.step(Event::Finished { generation: 2, result: Attempted::Failed("timed out".into()), now: t0 });
    assert!(s.retry_at().is_some());
    assert_eq!(s.step(Event::Target(goal(3))), [Action::Start(goal(3))]);
}

#[test]
fn failures_back_off_up_to_a_cap_and_say_since_when() {
    let t0 = Instant::now();
    let mut s = started(t0);
    let mut now = t0;
    for (attempt, wait) in [1u64, 2, 4, 8, 16, 32, 60, 60].into_iter().enumerate() {
        s.step(Event::Finished { generation: 1, result: Attempted::Failed(format!("refused {attempt}")), now });
        assert_eq!(s.retry_at(), Some(now + Duration::from_secs(wait)), "after {} failures", attempt + 1);
        assert!(s.step(Event::Tick(now + Duration::from_secs(wait) - Duration::from_millis(1))).is_empty());
        now += Duration::from_secs(wait);
        assert_eq!(s.step(Event::Tick(now)), [Action::Start(goal(1))]);
    }
    match s.phase() {
        Phase::Failing { since, reason } => assert_eq!((since, reason.as_str()), (t0, "refused 7")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn refused_objects_leave_the_revision_applied_and_are_retried() {
    let t0 = Instant::now();
    let mut s = started(t0);
    let refused = Attempted::Partly("1 object failed".into());
    assert!(s.step(Event::Finished { generation: 1, result: refused, now: t0 }).is_empty());
    assert_eq!(s.applied(), Some(goal(1)), "the revision is there");
    assert!(matches!(s.phase(), Phase::Incomplete { .. }), "{:?}", s.phase());
    assert_eq!(s.step(Event::Tick(t0 + Duration::from_secs(1))), [Action::Start(goal(1))], "retried");
    s.step(Event::Finished { generation: 1, result: Attempted::Applied, now: t0 + Duration::from_secs(2) });
    assert_eq!(s.phase(), Phase::Current);
    assert!(s.step(Event::Tick(t0 + Duration::from_secs(600))).is_empty());
}

#[test]
fn a_member_not_ready_is_not_contacted_and_is_tried_at_once_when_back() {
    let t0 = Instant::now();
    let mut s = started(t0);
    assert_eq!(s.step(Event::Ready(false)), [Action::Cancel], "the attempt in flight is dropped");
    assert_eq!(s.phase(), Phase::NotContacted);
    assert!(s.step(Event::Target(goal(2))).is_empty(), "not contacted");
    assert!(s.step(Event::Tick(t0 + Duration::from_secs(3600))).is_empty());
    assert_eq!(s.step(Event::Ready(true)), [Action::Start(goal(2))]);
}

#[test]
fn without_the_lease_nothing_is_written_and_a_new_leader_applies_afresh() {
    let t0 = Instant::now();
    let mut s = started(t0);
    s.step(Event::Finished { generation: 1, result: Attempted::Applied, now: t0 });
    assert!(s.step(Event::Leading(false)).is_empty());
    assert_eq!(s.phase(), Phase::StandingBy);
    assert!(s.step(Event::Leading(true)).is_empty(), "the old target is not applied again: it may be stale");
    assert_eq!(s.step(Event::Target(goal(2))), [Action::Start(goal(2))], "what the new leader publishes");
}

/// What a harness may do to a member: events as the worker would see them.
#[derive(Debug, Clone)]
enum Step {
    Publish,
    Ready(bool),
    Leading(bool),
    /// The attempt in flight ends (ok, partly, or not); or a stale end of an older
    /// generation.
    End {
        ok: bool,
        partly: bool,
        stale: bool,
    },
    Wait(u64),
}

/// What the harness knows of the member: what it published, the lease and health it
/// reported, the attempt in flight (from the actions), and the clock.
#[derive(Debug, Clone, Copy)]
struct Harness {
    published: u64,
    leading: bool,
    ready: bool,
    /// Whether a target was published since the lease was last lost.
    targeted: bool,
    in_flight: Option<u64>,
    now: Instant,
}

impl Default for Harness {
    fn default() -> Self {
        Self { published: 0, leading: false, ready: true, targeted: false, in_flight: None, now: Instant::now() }
    }
}

impl Harness {
    /// The event a step makes, as the worker would see it.
    fn event(&mut self, step: Step) -> Event {
        match step {
            Step::Publish => {
                self.published += 1;
                // Only what is published while this instance leads counts: a target that
                // reaches a standby was published before the lease was lost.
                self.targeted = self.leading;
                Event::Target(goal(self.published))
            }
            Step::Ready(r) => {
                self.ready = r;
                Event::Ready(r)
            }
            Step::Leading(l) => {
                self.leading = l;
                self.targeted &= l;
                Event::Leading(l)
            }
            Step::End { ok, partly, stale } => {
                let generation = match (self.in_flight, stale) {
                    (Some(g), false) => g,
                    _ => self.published.saturating_sub(1),
                };
                let result = match (ok, partly) {
                    (true, false) => Attempted::Applied,
                    (true, true) => Attempted::Partly("an object refused".into()),
                    (false, _) => Attempted::Failed("failed".into()),
                };
                Event::Finished { generation, result, now: self.now }
            }
            Step::Wait(secs) => {
                self.now += Duration::from_secs(secs);
                Event::Tick(self.now)
            }
        }
    }
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        3 => Just(Step::Publish),
        1 => any::<bool>().prop_map(Step::Ready),
        1 => any::<bool>().prop_map(Step::Leading),
        4 => (any::<bool>(), proptest::bool::weighted(0.2), proptest::bool::weighted(0.1))
            .prop_map(|(ok, partly, stale)| Step::End { ok, partly, stale }),
        3 => (0u64..90).prop_map(Step::Wait),
    ];
    proptest::collection::vec(step, 1..80)
}

proptest! {
    /// Over random sequences of publications, health changes, lease changes, attempt
    /// ends and time: never two attempts at once, never a start without the lease or
    /// while not Ready, never an older target applied after a newer one, never a target
    /// from before the lease was lost, and a Ready member under a leader always works
    /// on its newest target.
    #[test]
    fn a_member_converges_on_its_newest_target_and_keeps_its_invariants(steps in steps()) {
        let mut s = State::new();
        let mut harness = Harness::default();
        let mut highest_applied = 0u64;
        for step in steps {
            let event = harness.event(step);
            let ended = matches!(&event, Event::Finished { generation, .. } if Some(*generation) == harness.in_flight);
            if ended {
                harness.in_flight = None;
            }
            let Harness { published, leading, ready, targeted, .. } = harness;
            for action in s.step(event) {
                match action {
                    Action::Start(g) => {
                        prop_assert!(harness.in_flight.is_none(), "two attempts at once");
                        prop_assert!(leading && ready, "started without the lease or while not Ready");
                        prop_assert_eq!(g.generation, published, "an attempt at an old target");
                        prop_assert!(targeted, "a target kept from before the lease was lost");
                        harness.in_flight = Some(g.generation);
                    }
                    Action::Cancel => {
                        prop_assert!(harness.in_flight.take().is_some(), "cancelled nothing");
                    }
                }
            }
            prop_assert_eq!(s.running(), harness.in_flight.is_some());
            if let Some(applied) = s.applied() {
                prop_assert!(applied.generation >= highest_applied, "an older target applied after a newer");
                highest_applied = applied.generation;
            }
        }
        // Liveness: a Ready member under a leader, with time enough, works on the newest target.
        let Harness { published, leading, ready, targeted, in_flight, now } = harness;
        if leading && ready && targeted && s.applied().map(|a| a.generation) != Some(published) {
            let actions = s.step(Event::Tick(now + MAX_BACKOFF));
            let working = in_flight == Some(published) || actions == [Action::Start(goal(published))];
            prop_assert!(working, "idle with an unapplied target: {:?} {:?}", s.phase(), actions);
        }
    }
}
