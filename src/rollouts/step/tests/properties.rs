//! The rollout loop's decision over random histories: revisions published (governed
//! changes, ungoverned ones, the policy added and removed, the same revision rendered
//! anew), members observed, ticks, commands, the lease won and lost, the stored state
//! read, and renders that succeed or fail. Asserted after every event:
//!
//! - nothing is assigned while a rollout may hold members and the stored state has not
//!   been read since the lease was won;
//! - nothing is saved without the lease;
//! - every hold is at the revision its policy gives that member, with that revision's
//!   own plan, and names only objects the policy governs;
//! - with no rollout in progress (one was aborted), a member is held only at the last
//!   good revision.

use proptest::prelude::*;

use super::*;

#[derive(Debug, Clone)]
enum Random {
    /// Revision n: `web`'s colour and `tools`' version from n, with or without the policy.
    Publish {
        color: u8,
        version: u8,
        policy: bool,
    },
    /// The head rendered anew.
    Again,
    Observe(u8, bool, bool),
    Tick(i64),
    Command(u8),
    Leading(bool),
    Load,
    /// The oldest render asked for, done or failed.
    Render(bool),
}

fn history() -> impl Strategy<Value = Vec<Random>> {
    let step = prop_oneof![
        3 => (0u8..3, 0u8..3, proptest::bool::weighted(0.85)).prop_map(|(c, v, p)| Random::Publish { color: c, version: v, policy: p }),
        1 => Just(Random::Again),
        6 => (1u8..=3, proptest::bool::weighted(0.8), proptest::bool::weighted(0.9)).prop_map(|(m, at, h)| Random::Observe(m, at, h)),
        5 => (0i64..25_000).prop_map(Random::Tick),
        1 => (0u8..3).prop_map(Random::Command),
        1 => proptest::bool::weighted(0.8).prop_map(Random::Leading),
        2 => Just(Random::Load),
        3 => proptest::bool::weighted(0.9).prop_map(Random::Render),
    ];
    proptest::collection::vec(step, 1..120)
}

/// What the history told the decision.
#[derive(Default)]
struct World {
    now: i64,
    leading: bool,
    /// Read since the lease was last won.
    loaded: bool,
    /// Each revision's plan, by name.
    plans: BTreeMap<String, Arc<Plan>>,
    head: Option<(String, u8, u8, bool)>,
    saved: Option<Stored>,
    asked: Vec<String>,
    commands: u64,
}

fn check(state: &State, world: &World, actions: &[Action]) -> Result<(), TestCaseError> {
    for action in actions {
        match action {
            Action::Save(_) => prop_assert!(world.leading, "saved without the lease"),
            Action::Assign(assignment) => {
                let holding = !state.policies().is_empty() || !assignment.head.plan.loaded.rollout_policies.is_empty();
                prop_assert!(!holding || world.loaded, "assigned before the stored state was read");
                for (member, holds) in &assignment.holds {
                    for hold in holds {
                        let policy = &state.policies()[&hold.policy];
                        // With no rollout in progress (one was aborted), only at the last good one.
                        prop_assert!(
                            policy.active.is_some() || policy.last_good.as_ref() == Some(&hold.revision),
                            "{} held at {} with no rollout in progress",
                            member,
                            hold.revision
                        );
                        prop_assert_eq!(policy.target(member), Some(hold.revision.as_str()));
                        prop_assert_eq!(&hold.plan.revision, &hold.revision, "a hold with another revision's plan");
                        let governed = flotilla_core::rollout::compose::governed_keys(
                            &assignment.head.plan,
                            &hold.plan,
                            hold.policy.as_ref(),
                        );
                        prop_assert!(hold.keys.iter().all(|k| governed.contains(k)));
                    }
                }
            }
            Action::Render(_) | Action::Warn(_) => {}
        }
    }
    Ok(())
}

fn rendered(name: &str, color: u8, version: u8, policy: bool) -> Arc<Plan> {
    plan(name, ["blue", "green", "red"][color as usize], &version.to_string(), policy)
}

fn event(world: &mut World, random: Random) -> Option<Event> {
    let now = world.now;
    Some(match random {
        Random::Publish { color, version, policy } => {
            let name = format!("c{color}v{version}{}", if policy { "p" } else { "" });
            let plan = rendered(&name, color, version, policy);
            world.plans.insert(name.clone(), plan.clone());
            world.head = Some((name.clone(), color, version, policy));
            Event::Published { revision: name, plan, now }
        }
        Random::Again => {
            let (name, color, version, policy) = world.head.clone()?;
            Event::Published { plan: rendered(&name, color, version, policy), revision: name, now }
        }
        Random::Observe(m, at, healthy) => {
            let at = if at { world.head.as_ref().map(|h| h.0.clone()) } else { None };
            Event::Observed { policy: web(), cluster: format!("member{m}"), at, healthy, now }
        }
        Random::Tick(ms) => {
            world.now += ms;
            Event::Tick(world.now)
        }
        Random::Command(c) => {
            world.commands += 1;
            let command = [Command::Pause, Command::Resume, Command::Abort][c as usize];
            Event::Command { policy: web(), id: world.commands, command, now }
        }
        Random::Leading(leading) => {
            world.leading = leading;
            world.loaded = false;
            Event::Leading(leading)
        }
        Random::Load => {
            world.loaded = true;
            Event::Loaded(world.saved.clone())
        }
        Random::Render(ok) => {
            if world.asked.is_empty() {
                return None;
            }
            let revision = world.asked.remove(0);
            let plan = world.plans.get(&revision).cloned().filter(|_| ok).ok_or_else(|| "gone".to_owned());
            Event::Rendered { revision, plan }
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn holds_follow_the_policies_and_wait_for_the_stored_state(history in history()) {
        let mut state = State::new();
        let mut world = World::default();
        for random in history {
            let Some(event) = event(&mut world, random) else { continue };
            let actions = state.step(event);
            check(&state, &world, &actions)?;
            for action in actions {
                match action {
                    Action::Save(stored) => world.saved = Some(stored),
                    Action::Render(revision) => world.asked.push(revision),
                    _ => {}
                }
            }
        }
    }
}
