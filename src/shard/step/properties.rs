//! Replicas sharing members through Leases in one simulated host, over random rounds,
//! failures, kills, releases and restarts: no member ever has two writers (two replicas
//! owning it with their right to write unexpired at the same instant), and once every
//! live replica rounds normally again, every member has exactly one.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;

#[derive(Debug, Clone)]
enum Op {
    /// Replica `i` runs a round: its write and its list each succeed or fail, and take
    /// `latency` ms each.
    Round { i: usize, wrote: bool, listed: bool, latency: u64 },
    /// Time passes.
    Wait(u64),
    /// Replica `i` dies (SIGKILL): its Lease stays until it ages out.
    Kill(usize),
    /// Replica `i` stops: it stops writing, then deletes its Lease.
    Release(usize),
    /// Replica `i` starts again (a new incarnation, a new identity).
    Start(usize),
}

fn op(replicas: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..replicas, prop::bool::weighted(0.9), prop::bool::weighted(0.9), 0u64..300)
            .prop_map(|(i, wrote, listed, latency)| Op::Round { i, wrote, listed, latency }),
        3 => (50u64..2_000).prop_map(Op::Wait),
        1 => (0..replicas).prop_map(Op::Kill),
        1 => (0..replicas).prop_map(Op::Release),
        1 => (0..replicas).prop_map(Op::Start),
    ]
}

struct Replica {
    membership: Membership,
    alive: bool,
}

struct World {
    now: Instant,
    timing: Timing,
    /// The host's Leases: identity → version.
    leases: BTreeMap<String, u64>,
    version: u64,
    replicas: Vec<Replica>,
    incarnations: usize,
    members: BTreeSet<String>,
}

impl World {
    fn new(n: usize) -> Self {
        let timing = Timing::new(Duration::from_secs(3), None, Some(Duration::from_millis(400))).unwrap();
        let members: BTreeSet<String> = (0..12).map(|i| format!("member{i}")).collect();
        let mut world = World {
            now: Instant::now(),
            timing,
            leases: BTreeMap::new(),
            version: 0,
            replicas: Vec::new(),
            incarnations: 0,
            members,
        };
        for _ in 0..n {
            let replica = world.incarnation();
            world.replicas.push(replica);
        }
        world
    }

    fn incarnation(&mut self) -> Replica {
        self.incarnations += 1;
        let mut membership = Membership::new(format!("replica-{}", self.incarnations), self.timing);
        membership.step(Event::Members(self.members.clone()));
        Replica { membership, alive: true }
    }

    /// Advances the clock in small steps, checking at each.
    fn pass(&mut self, ms: u64) -> Result<(), TestCaseError> {
        let mut left = ms;
        while left > 0 {
            let step = left.min(25);
            self.now += Duration::from_millis(step);
            left -= step;
            self.check()?;
        }
        Ok(())
    }

    fn round(&mut self, i: usize, wrote: bool, listed: bool, latency: u64) -> Result<(), TestCaseError> {
        if !self.replicas[i].alive {
            return Ok(());
        }
        let started = self.now;
        self.pass(latency)?;
        let me = self.replicas[i].membership.me.clone();
        if wrote {
            self.version += 1;
            self.leases.insert(me, self.version);
        }
        self.pass(latency)?;
        let seen = listed.then(|| {
            self.leases
                .iter()
                .map(|(identity, v)| Listed { identity: identity.clone(), version: v.to_string() })
                .collect()
        });
        let received = self.now;
        self.replicas[i].membership.step(Event::Round { started, received, renewed: wrote, listed: seen });
        self.check()
    }

    /// No member has two writers now.
    fn check(&self) -> Result<(), TestCaseError> {
        let mut writers: BTreeMap<&String, Vec<&String>> = BTreeMap::new();
        for r in self.replicas.iter().filter(|r| r.alive) {
            let shard = r.membership.shard(self.now);
            if shard.until.is_some_and(|u| self.now < u) {
                for m in &self.members {
                    if shard.owned.contains(m) {
                        writers.entry(m).or_default().push(&r.membership.me);
                    }
                }
            }
        }
        for (member, who) in writers {
            prop_assert!(who.len() <= 1, "{member} has writers {who:?}");
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn no_member_ever_has_two_writers_and_each_has_one_once_all_is_well(
        n in 1usize..4,
        ops in prop::collection::vec(op(3), 1..80),
    ) {
        let mut world = World::new(n);
        for op in ops {
            match op {
                Op::Round { i, wrote, listed, latency } if i < world.replicas.len() => world.round(i, wrote, listed, latency)?,
                Op::Wait(ms) => world.pass(ms)?,
                Op::Kill(i) if i < world.replicas.len() => world.replicas[i].alive = false,
                Op::Release(i) if i < world.replicas.len() => {
                    world.replicas[i].alive = false;
                    let me = world.replicas[i].membership.me.clone();
                    world.leases.remove(&me);
                }
                Op::Start(i) if i < world.replicas.len() && !world.replicas[i].alive => {
                    let replica = world.incarnation();
                    world.replicas[i] = replica;
                }
                _ => {}
            }
        }
        // All is well again: every live replica rounds each retry period, for a while.
        let (retry, settle) = (world.timing.retry.as_millis() as u64, world.timing.duration * 3);
        let until = world.now + settle;
        while world.now < until {
            for i in 0..world.replicas.len() {
                world.round(i, true, true, 10)?;
            }
            world.pass(retry)?;
        }
        let alive: Vec<&Replica> = world.replicas.iter().filter(|r| r.alive).collect();
        if !alive.is_empty() {
            for m in &world.members {
                let owners = alive.iter().filter(|r| r.membership.shard(world.now).owned.contains(m)).count();
                prop_assert_eq!(owners, 1, "{} after the fleet settled", m);
            }
        }
    }
}
