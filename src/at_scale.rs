//! The controller's pure decisions at 1,000 and 5,000 members, from generated state:
//! the figures docs/performance.md models where this machine cannot hold the members.
//! They run with the unit tests (so CI proves they still work); `hack/bench-steps.sh`
//! runs them in a release build and prints
//! each decision's time per round. Nothing here asserts a time: the figures are
//! measured, not tested; each run asserts only that the decision did its work.

#[path = "../crates/core/benches/support/generate.rs"]
#[allow(dead_code)]
mod generate;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use flotilla_core::model::{ClusterState, Limits, RepoFiles};

use crate::failover::step as failover;
use crate::git::Revision;
use crate::leader::elect::Timing;
use crate::members::step as members;
use crate::shard::step as shard;

const COUNTS: [usize; 2] = [1_000, 5_000];
const ROUNDS: u32 = 20;

/// The median of `rounds` runs of `round`, and what the last returned.
fn timed<T>(rounds: u32, mut round: impl FnMut(u32) -> T) -> (Duration, T) {
    let mut times = Vec::new();
    let mut last = None;
    for r in 0..rounds {
        let start = Instant::now();
        last = Some(round(r));
        times.push(start.elapsed());
    }
    times.sort();
    (times[times.len() / 2], last.unwrap())
}

fn report(decision: &str, n: usize, per_round: Duration, what: &str) {
    println!("{decision:<34} {n:>6} members  {:>10.3} ms a round  ({what})", per_round.as_secs_f64() * 1e3);
}

fn names(n: usize) -> Vec<String> {
    (0..n).map(|c| format!("c{c}")).collect()
}

/// Every member's worker: a new target published, every attempt finished, a tick.
#[test]
fn members_step_at_scale() {
    for n in COUNTS {
        let mut workers: Vec<members::State> = (0..n).map(|_| members::State::new()).collect();
        for w in &mut workers {
            w.step(members::Event::Ready(true));
            w.step(members::Event::Leading(true));
        }
        let (per_round, started) = timed(ROUNDS, |r| {
            let goal =
                members::Goal { generation: u64::from(r) + 1, revision: Revision::from_bytes(&[r as u8; 20]).unwrap() };
            let now = Instant::now();
            let mut started = 0;
            for w in &mut workers {
                started += w.step(members::Event::Target(goal)).len();
                w.step(members::Event::Finished {
                    generation: goal.generation,
                    result: members::Attempted::Applied,
                    now,
                });
                w.step(members::Event::Tick(now));
            }
            started
        });
        assert_eq!(started, n, "every worker starts the new target");
        report("members: target, applied, tick", n, per_round, "every worker");
    }
}

/// The failover loop: a render of 5,000 templates over `n` members, then a round of
/// every member's probe and a tick, one member failing.
#[test]
fn failover_step_at_scale() {
    for n in COUNTS {
        let mut files = RepoFiles { revision: "r1".into(), ..Default::default() };
        for (path, text) in generate::generate(5_000, n) {
            files.files.insert(path, text.into_bytes());
        }
        let plan = Arc::new(flotilla_core::plan(&files, &ClusterState::default(), &Limits::default()).unwrap());
        let settings = failover::Settings {
            failure_threshold: Duration::from_secs(30),
            success_threshold: Duration::from_secs(30),
            monitor_grace: Duration::from_secs(40),
            startup_grace: Duration::from_secs(60),
            eviction: true,
            eviction_rate: 0.5,
            graceful_timeout: Duration::from_secs(600),
            unhealthy_threshold: 0.55,
        };
        let mut state = failover::State::new(settings);
        state.step(failover::Event::Leading(true, 0));
        state.step(failover::Event::Loaded(None));
        let start = Instant::now();
        state.step(failover::Event::Rendered(plan));
        report("failover: a render taken", n, start.elapsed(), "5,000 templates");
        let clusters = names(n);
        let (per_round, _) = timed(ROUNDS, |r| {
            let now = 1_000 * i64::from(r);
            for (i, cluster) in clusters.iter().enumerate() {
                state.step(failover::Event::Probed { cluster: cluster.clone(), ok: i != 0, now });
            }
            state.step(failover::Event::Tick(now))
        });
        report("failover: every probe and a tick", n, per_round, "one member failing");
    }
}

/// The membership of one of three replicas: a round that lists the others, and where
/// it stands (every member's rendezvous owner).
#[test]
fn shard_step_at_scale() {
    let timing = Timing::new(Duration::from_secs(15), None, None).unwrap();
    for n in COUNTS {
        let mut membership = shard::Membership::new("replica-0".into(), timing);
        membership.step(shard::Event::Members(names(n).into_iter().collect::<BTreeSet<_>>()));
        let begun = Instant::now();
        let (per_round, owned) = timed(ROUNDS, |r| {
            // Past the join delay from the first round on: rounds a retry period apart.
            let at = begun + timing.retry * r;
            let listed = (1..3)
                .map(|p| shard::Listed { identity: format!("replica-{p}"), version: format!("{r}") })
                .collect::<Vec<_>>();
            membership.step(shard::Event::Round { started: at, received: at, renewed: true, listed: Some(listed) });
            membership.shard(at).owned.len()
        });
        assert!(owned > n / 5 && owned < n / 2, "one of three replicas owns about a third: {owned} of {n}");
        report("shard: a round and the shares", n, per_round, "three replicas");
    }
}
