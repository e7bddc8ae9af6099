//! The rollout decision over random histories: revisions (r1..r4), revisions that
//! change nothing governed (a1..a4), members observed at
//! random revisions and health, gates, windows, pauses, resumes, aborts, the lease and
//! time; members follow their targets when the history says so. Asserted on every
//! target sent, against what the history told the decision:
//!
//! - sent only with the lease, only to members of the batches;
//! - a revision is sent only as the rollout's own or as the last good one;
//! - the new revision reaches a batch only while windows are open and nothing is
//!   paused, and only after every member of the batch before it (failed ones aside)
//!   stood at it, healthy, for the soak.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

#[derive(Debug, Clone)]
enum Random {
    Revision(u8),
    /// A revision that changes nothing governed (`Advance`).
    Advance(u8),
    /// A member (1..=4) observed: at what it was sent or elsewhere, healthy or not.
    Member(u8, bool, bool),
    Gates(bool),
    Windows(bool),
    Pause,
    Resume,
    Abort,
    Leading(bool),
    Wait(i64),
}

fn history() -> impl Strategy<Value = Vec<Random>> {
    let step = prop_oneof![
        1 => (1u8..=4).prop_map(Random::Revision),
        1 => (1u8..=4).prop_map(Random::Advance),
        8 => (1u8..=4, proptest::bool::weighted(0.8), proptest::bool::weighted(0.8))
            .prop_map(|(m, t, h)| Random::Member(m, t, h)),
        1 => proptest::bool::weighted(0.3).prop_map(Random::Gates),
        1 => proptest::bool::weighted(0.7).prop_map(Random::Windows),
        1 => Just(Random::Pause),
        1 => Just(Random::Resume),
        1 => Just(Random::Abort),
        1 => proptest::bool::weighted(0.8).prop_map(Random::Leading),
        6 => (0i64..30_000).prop_map(Random::Wait),
    ];
    proptest::collection::vec(step, 1..150)
}

/// What the history told the decision.
struct World {
    now: i64,
    leading: bool,
    windows: bool,
    paused: bool,
    /// Per member: the revision it was observed at, healthy, and since when both held.
    members: BTreeMap<String, (Option<String>, bool, i64)>,
}

impl World {
    fn observe(&mut self, cluster: &str, at: Option<String>, healthy: bool) {
        let now = self.now;
        let entry = self.members.entry(cluster.to_owned()).or_insert((None, false, now));
        if (entry.0.as_ref(), entry.1) != (at.as_ref(), healthy) {
            *entry = (at, healthy, now);
        }
    }

    /// Whether `cluster` has stood at `revision`, healthy, for `soak`.
    fn stood(&self, cluster: &str, revision: &str, soak: i64) -> bool {
        self.members
            .get(cluster)
            .is_some_and(|(at, healthy, since)| *healthy && at.as_deref() == Some(revision) && self.now - since >= soak)
    }
}

fn check(state: &State, before: &State, world: &World, actions: &[Action], s: &Settings) -> Result<(), TestCaseError> {
    for Action::Target { cluster, revision } in actions {
        prop_assert!(world.leading, "{} sent {} without the lease", cluster, revision);
        prop_assert!(batches().iter().any(|b| b.clusters.contains(cluster)), "{} is in no batch", cluster);
        let own = |st: &State| st.active.clone().filter(|a| &a.revision == revision);
        let rolling = own(before).or_else(|| own(state));
        let good = before.last_good.as_ref() == Some(revision) || state.last_good.as_ref() == Some(revision);
        prop_assert!(rolling.is_some() || good, "{} sent {}, neither rolling out nor last good", cluster, revision);
        let Some(active) = rolling else { continue };
        let moved_before = before.active.as_ref().is_some_and(|a| a.moved.contains(cluster));
        if moved_before && active.moved.contains(cluster) {
            continue; // sent again (a new leader), or under the revision's new name (`Advance`)
        }
        let batch = active.batches.iter().position(|b| b.clusters.contains(cluster)).expect("checked above");
        prop_assert!(world.windows && !world.paused, "batch {} started with windows closed or paused", batch);
        if batch == 0 {
            continue;
        }
        let failed = |st: &State| st.active.as_ref().map(|a| a.failed.clone()).unwrap_or_default();
        let (failed, failed_before) = (failed(state), failed(before));
        for member in &active.batches[batch - 1].clusters {
            let excused = failed.contains(member) || failed_before.contains(member);
            prop_assert!(
                excused || world.stood(member, revision, s.min_success_ms),
                "{} sent {} before {} stood at it for the soak",
                cluster,
                revision,
                member
            );
        }
    }
    Ok(())
}

/// The event a random step stands for, keeping `world` up to date.
fn event(world: &mut World, state: &State, sent: &mut BTreeMap<String, String>, random: Random) -> Event {
    let now = world.now;
    match random {
        Random::Revision(n) => Event::Revision { revision: format!("r{n}"), batches: batches(), now },
        Random::Advance(n) => {
            // The same governed objects under another name: what stood at the old one
            // stands at the new one, since when it stood.
            let revision = format!("a{n}");
            let old = state.active.as_ref().map(|a| a.revision.clone()).or(state.last_good.clone());
            if old.as_ref() != Some(&revision) {
                for (at, _, _) in world.members.values_mut().filter(|m| m.0 == old) {
                    *at = Some(revision.clone());
                }
                for got in sent.values_mut().filter(|r| Some(r.as_str()) == old.as_deref()) {
                    *got = revision.clone();
                }
            }
            Event::Advance { revision, now }
        }
        Random::Member(m, follows, healthy) => {
            let cluster = format!("member{m}");
            let at = if follows { sent.get(&cluster).cloned() } else { Some("r9".to_owned()) };
            world.observe(&cluster, at.clone(), healthy);
            Event::Member { cluster, at, healthy, now }
        }
        Random::Gates(failing) => Event::Gates { failing: failing.then(|| "errors".to_owned()), now },
        Random::Windows(open) => {
            world.windows = open;
            Event::Windows { open, now }
        }
        Random::Pause => {
            world.paused = true;
            Event::Pause(now)
        }
        Random::Resume => {
            world.paused = false;
            Event::Resume(now)
        }
        Random::Abort => Event::Abort(now),
        Random::Leading(leading) => {
            world.leading = leading;
            Event::Leading(leading)
        }
        Random::Wait(ms) => {
            world.now += ms;
            Event::Tick(world.now)
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn rollouts_keep_their_order_windows_and_lease(history in history(), revert in any::<bool>(), tolerated in 0u32..=1) {
        let on_failure = if revert { OnFailure::Revert } else { OnFailure::Pause };
        let s = Settings { progress_deadline_ms: 45_000, ..settings(on_failure, tolerated) };
        let mut state = State::new();
        let mut world = World { now: 0, leading: false, windows: true, paused: false, members: BTreeMap::new() };
        // What each member was last sent.
        let mut sent: BTreeMap<String, String> = BTreeMap::new();
        for random in history {
            let event = event(&mut world, &state, &mut sent, random);
            let before = state.clone();
            let actions = state.step(&s, event);
            check(&state, &before, &world, &actions, &s)?;
            for Action::Target { cluster, revision } in actions {
                sent.insert(cluster, revision);
            }
        }
    }
}
