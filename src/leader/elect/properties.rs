//! Leader election over random histories: three candidates share one simulated Lease.
//! Reads answer late or time out; writes land, are refused, lose their reply, or land
//! after their request gave up; processes freeze (no events), release, crash and
//! restart; wall clocks are skewed; timings are drawn at random among those
//! [`Timing::new`] accepts. Asserted, as the executor's [`crate::leader::Fence`] reads it
//! (holding while `now < until`):
//!
//! - never two candidates hold at one instant;
//! - a candidate holds only up to its last acknowledged write's read time plus the
//!   renew deadline;
//! - a candidate left alone with a working host holds within twice the lease duration.

use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;

const CANDIDATES: usize = 3;

#[derive(Debug, Clone)]
enum Random {
    /// A candidate moves on: an idle one sends its read; a reading one gets its answer
    /// (the Lease as it is now, or a timeout past its bound); a writing one's write
    /// reaches the server (or not) and its reply arrives (or not).
    Advance {
        who: usize,
        applied: bool,
        answered: bool,
    },
    Tick(usize),
    Release(usize),
    /// The process dies and a new one with the same identity starts.
    Restart(usize),
    /// Time passes, in attempt-thousandths.
    Wait(u64),
    /// Time passes, in lease-duration thousandths.
    Pause(u64),
}

fn history() -> impl Strategy<Value = Vec<Random>> {
    let who = 0..CANDIDATES;
    let step = prop_oneof![
        12 => (who.clone(), proptest::bool::weighted(0.8), proptest::bool::weighted(0.8))
            .prop_map(|(who, applied, answered)| Random::Advance { who, applied, answered }),
        2 => who.clone().prop_map(Random::Tick),
        1 => who.clone().prop_map(Random::Release),
        1 => who.prop_map(Random::Restart),
        4 => (0u64..700).prop_map(Random::Wait),
        2 => (0u64..700).prop_map(Random::Pause),
    ];
    proptest::collection::vec(step, 1..200)
}

/// Timings `Timing::new` accepts: a duration of 1 to 30 s, with or without a deadline
/// and retry period of its own.
fn timing() -> impl Strategy<Value = Timing> {
    (prop_oneof![1u64..3, 1u64..30], proptest::option::of(1u64..1000), proptest::option::of(1u64..1000))
        .prop_filter_map("a timing Timing::new refuses", |(duration, deadline, retry)| {
            let duration = Duration::from_secs(duration);
            let deadline = deadline.map(|d| duration * d as u32 / 1000);
            let retry = retry.map(|r| deadline.unwrap_or(duration * 2 / 3) * r as u32 / 1000);
            Timing::new(duration, deadline, retry).ok()
        })
}

/// The host cluster's Lease.
#[derive(Default)]
struct Server {
    lease: Option<Seen>,
    writes: u64,
}

impl Server {
    /// Applies a write if it names the current state, as the API server does.
    fn apply(&mut self, action: &Action) -> Option<Seen> {
        let spec = match action {
            Action::Create(spec) if self.lease.is_none() => spec,
            Action::Replace { spec, version } if self.lease.as_ref().is_some_and(|l| &l.version == version) => spec,
            _ => return None,
        };
        self.writes += 1;
        self.lease = Some(Seen { spec: spec.clone(), version: self.writes.to_string() });
        self.lease.clone()
    }
}

/// A write in flight: what, when its read was sent, and when its request gives up.
struct Pending {
    action: Action,
    read_at: Instant,
    bound: Instant,
}

/// Where a candidate's requests stand (the executor sends one at a time).
enum Request {
    Idle,
    Reading { sent: Instant },
    Writing(Pending),
}

struct Candidate {
    elector: Elector,
    request: Request,
    /// The latest instant this process has been told of.
    last: Instant,
    /// Gone until restarted (after a release).
    stopped: bool,
    /// Wall-clock skew, in seconds.
    skew: i64,
    /// The read time of its last acknowledged write.
    acknowledged: Option<Instant>,
}

struct World {
    timing: Timing,
    start: Instant,
    now: Instant,
    server: Server,
    candidates: Vec<Candidate>,
}

impl World {
    fn new(timing: Timing) -> Self {
        let start = Instant::now();
        let candidates = (0..CANDIDATES)
            .map(|i| Candidate {
                elector: Elector::new(format!("replica-{i}"), timing),
                request: Request::Idle,
                last: start,
                stopped: false,
                skew: [0, -40, 3_600][i],
                acknowledged: None,
            })
            .collect();
        Self { timing, start, now: start, server: Server::default(), candidates }
    }

    fn wall(&self, who: usize) -> Timestamp {
        let ms = (self.now - self.start).as_millis() as i64 + self.candidates[who].skew * 1000;
        Timestamp::from_millisecond(1_800_000_000_000 + ms).unwrap()
    }

    fn apply(&mut self, random: Random) {
        let attempt = self.timing.attempt();
        match random {
            Random::Wait(thousandths) => self.now += attempt * thousandths as u32 / 1000,
            Random::Pause(thousandths) => self.now += self.timing.duration * thousandths as u32 / 1000,
            Random::Advance { who, applied, answered } => self.advance(who, applied, answered),
            Random::Tick(who) => {
                if self.idle(who) {
                    self.step(who, self.now, Event::Tick { now: self.now });
                }
            }
            Random::Release(who) => {
                if self.idle(who) {
                    self.step(who, self.now, Event::Release);
                    self.candidates[who].stopped = true;
                }
            }
            Random::Restart(who) => {
                let c = &mut self.candidates[who];
                c.elector = Elector::new(format!("replica-{who}"), self.timing);
                (c.request, c.stopped, c.acknowledged) = (Request::Idle, false, None);
            }
        }
        self.check();
    }

    fn idle(&self, who: usize) -> bool {
        !self.candidates[who].stopped && matches!(self.candidates[who].request, Request::Idle)
    }

    fn advance(&mut self, who: usize, applied: bool, answered: bool) {
        let attempt = self.timing.attempt();
        match std::mem::replace(&mut self.candidates[who].request, Request::Idle) {
            Request::Idle if !self.candidates[who].stopped => {
                self.candidates[who].request = Request::Reading { sent: self.now };
            }
            Request::Idle => {}
            Request::Reading { sent } => {
                let event = if answered && self.now <= sent + attempt {
                    Event::Seen {
                        now: sent,
                        received: self.now,
                        wall: self.wall(who),
                        lease: self.server.lease.clone(),
                    }
                } else {
                    Event::Unseen { now: self.now.min(sent + attempt) }
                };
                self.step(who, self.now, event);
            }
            Request::Writing(pending) => {
                let landed = if applied { self.server.apply(&pending.action) } else { None };
                let event = match landed {
                    Some(seen) if answered && self.now <= pending.bound => Event::Wrote(seen),
                    _ => Event::WriteFailed { now: self.now.min(pending.bound) },
                };
                if matches!(event, Event::Wrote(_)) {
                    self.candidates[who].acknowledged = Some(pending.read_at);
                }
                let told = self.now.min(pending.bound).max(self.candidates[who].last);
                self.step(who, told, event);
            }
        }
    }

    /// Gives `event` to a candidate at `at`, keeping the write it decides in flight.
    fn step(&mut self, who: usize, at: Instant, event: Event) {
        let read_at = match &event {
            Event::Seen { now, .. } => Some(*now),
            _ => None,
        };
        let c = &mut self.candidates[who];
        c.last = c.last.max(at);
        for action in c.elector.step(event) {
            if let Action::Create(_) | Action::Replace { .. } = action {
                let read_at = read_at.unwrap_or(at);
                // A release is sent after the loop stopped, with a bound of its own.
                let bound = read_at + self.timing.attempt();
                c.request = Request::Writing(Pending { action, read_at, bound });
            }
        }
    }

    fn holds(&self, who: usize) -> bool {
        self.candidates[who].elector.until().is_some_and(|until| self.now < until)
    }

    fn check(&self) {
        let holders: Vec<usize> = (0..CANDIDATES).filter(|&i| self.holds(i)).collect();
        assert!(holders.len() <= 1, "{holders:?} hold at once, {:?} in", self.now - self.start);
        for (i, c) in self.candidates.iter().enumerate() {
            if let Some(until) = c.elector.until() {
                let ack = c.acknowledged.expect("holding without an acknowledged write");
                assert!(until <= ack + self.timing.deadline, "replica-{i} holds past its renew deadline");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10_000, ..ProptestConfig::default() })]

    #[test]
    fn one_holder_at_a_time_and_a_lone_candidate_leads(timing in timing(), history in history()) {
        let mut world = World::new(timing);
        for random in history {
            world.apply(random);
        }
        // Others freeze; the first candidate, restarted, finds the host answering at once.
        world.apply(Random::Restart(0));
        let end = world.now + timing.duration * 2 + timing.retry;
        loop {
            for _ in 0..3 {
                world.apply(Random::Advance { who: 0, applied: true, answered: true });
            }
            if world.holds(0) || world.now >= end {
                break;
            }
            world.now += timing.retry;
        }
        prop_assert!(world.holds(0), "a lone candidate did not lead within {:?}", timing.duration * 2);
    }
}
