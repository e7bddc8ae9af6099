//! The pure decision of leader election over a `coordination.k8s.io/v1` Lease, with
//! client-go's semantics (`tools/leaderelection`):
//!
//! - A candidate takes a Lease that is missing, released (no holder), or whose record
//!   has not changed for the record's own duration *as this process observed it*: time
//!   is measured on the local monotonic clock from when the answer that first showed the
//!   record arrived (as client-go's `observedTime`; not from when that read was sent, as
//!   the record may have been written while the read was on its way), never by comparing
//!   another node's `renewTime` with our wall clock, so clock skew between nodes cannot
//!   hand the lease to two holders.
//! - Writes carry the `resourceVersion` they read, so of two candidates one wins.
//! - The holder renews every retry period, and stops leading once it has not renewed
//!   within the renew deadline, which is shorter than the duration. Its leadership is
//!   counted from *before* the read that preceded a successful renewal, so it ends
//!   `duration - deadline` before any standby could take the lease over: a leader cut
//!   off from the host cluster stops writing before another can start.
//!
//! The executor ([`super::Leadership`]) reads, writes and keeps time; this decides.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;

/// A Lease as read: its spec and the version a write must name.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    /// The Lease's spec.
    pub spec: LeaseSpec,
    /// Its `metadata.resourceVersion`.
    pub version: String,
}

/// Something that happened to the election.
#[derive(Debug, Clone)]
pub enum Event {
    /// The Lease was read (`None`: there is none). `now` is taken before the read was
    /// sent, `received` when its answer came; `wall` is the wall-clock time written into
    /// a record. A leader counts its leadership from `now` (the record it writes next
    /// can be no older); another candidate counts a record's age from `received` (the
    /// record may have been written while the read was on its way).
    Seen { now: Instant, received: Instant, wall: Timestamp, lease: Option<Seen> },
    /// Reading the Lease failed or timed out.
    Unseen { now: Instant },
    /// The write decided after the last `Seen` succeeded, leaving this Lease.
    Wrote(Seen),
    /// The write failed (a conflict: another candidate wrote first; or a timeout).
    WriteFailed { now: Instant },
    /// Time passed.
    Tick { now: Instant },
    /// The process stops: give the lease up if held.
    Release,
}

/// What the executor does.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Create the Lease with this spec.
    Create(LeaseSpec),
    /// Replace the Lease, if it is still at `version`.
    Replace { spec: LeaseSpec, version: String },
    /// Leadership began (`true`) or ended (`false`).
    Lead(bool),
}

/// Timing of an election; `retry < deadline < duration`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// How long a record stays valid without renewal.
    pub duration: Duration,
    /// How long a leader keeps leading without a successful renewal.
    pub deadline: Duration,
    /// Time between attempts to acquire or renew.
    pub retry: Duration,
}

impl Timing {
    /// client-go's proportions (15 s, 10 s, 2 s) for a given duration, unless set.
    pub fn new(duration: Duration, deadline: Option<Duration>, retry: Option<Duration>) -> Result<Self, String> {
        let deadline = deadline.unwrap_or(duration * 2 / 3);
        let retry = retry.unwrap_or((duration * 2 / 15).max(Duration::from_millis(100)));
        if duration < Duration::from_secs(1) {
            return Err(format!("the lease duration ({duration:?}) must be at least 1s"));
        }
        if duration.subsec_nanos() != 0 {
            // Others wait for the record's whole seconds, so a shorter wait than ours
            // would let them take the lease while this leader still writes.
            return Err(format!("the lease duration ({duration:?}) must be whole seconds, as a Lease records it"));
        }
        if deadline >= duration {
            return Err(format!(
                "the renew deadline ({deadline:?}) must be shorter than the lease duration ({duration:?})"
            ));
        }
        if retry >= deadline {
            return Err(format!("the retry period ({retry:?}) must be shorter than the renew deadline ({deadline:?})"));
        }
        Ok(Self { duration, deadline, retry })
    }

    /// How long one attempt's requests (a read, and the write it decides) may take: a
    /// retry period, at least a second, and never past the renew deadline.
    pub fn attempt(&self) -> Duration {
        self.retry.max(Duration::from_secs(1)).min(self.deadline)
    }
}

/// One candidate's view of the election.
#[derive(Debug)]
pub struct Elector {
    identity: String,
    timing: Timing,
    /// The last record seen, and when this process first saw it so.
    observed: Option<(Seen, Instant)>,
    /// The `now` of the read whose write is pending.
    pending: Option<Instant>,
    /// Leading until this instant (a renewal moves it on).
    until: Option<Instant>,
}

impl Elector {
    /// A candidate named `identity`, not leading.
    pub fn new(identity: String, timing: Timing) -> Self {
        Self { identity, timing, observed: None, pending: None, until: None }
    }

    /// Whether this candidate leads at `now`.
    #[cfg(test)]
    pub fn leading(&self, now: Instant) -> bool {
        self.until.is_some_and(|until| now < until)
    }

    /// When leadership ends unless renewed.
    pub fn until(&self) -> Option<Instant> {
        self.until
    }

    /// Decides what follows `event`.
    pub fn step(&mut self, event: Event) -> Vec<Action> {
        let was = self.until.is_some();
        let mut actions = match event {
            Event::Seen { now, received, wall, lease } => {
                self.expire(received);
                self.pending = None;
                self.decide(now, received, wall, lease).into_iter().collect()
            }
            Event::Unseen { now } | Event::WriteFailed { now } | Event::Tick { now } => {
                self.pending = None;
                self.expire(now);
                Vec::new()
            }
            Event::Wrote(seen) => match self.pending.take() {
                Some(read_at) => {
                    self.observed = Some((seen, read_at));
                    self.until = Some(read_at + self.timing.deadline);
                    Vec::new()
                }
                None => Vec::new(),
            },
            Event::Release => self.release().into_iter().collect(),
        };
        let is = self.until.is_some();
        if was != is {
            actions.push(Action::Lead(is));
        }
        actions
    }

    fn expire(&mut self, now: Instant) {
        if self.until.is_some_and(|until| now >= until) {
            self.until = None;
        }
    }

    fn decide(&mut self, now: Instant, received: Instant, wall: Timestamp, lease: Option<Seen>) -> Option<Action> {
        let Some(lease) = lease else {
            self.until = None;
            self.pending = Some(now);
            return Some(Action::Create(self.record(wall, None)));
        };
        // Any write changes the version, so a renewal is seen even within one wall-clock tick.
        if self.observed.as_ref().is_none_or(|(observed, _)| observed != &lease) {
            self.observed = Some((lease.clone(), received));
        }
        let Seen { spec, version } = lease;
        let held_by_other = spec.holder_identity.as_deref().is_some_and(|h| !h.is_empty() && h != self.identity);
        if held_by_other {
            // Whatever this process believed, someone else holds it now.
            self.until = None;
            let seen_at = self.observed.as_ref().map_or(received, |(_, at)| *at);
            let lasts = Duration::from_secs(spec.lease_duration_seconds.unwrap_or(0).max(0) as u64);
            if now < seen_at + lasts {
                return None;
            }
        }
        self.pending = Some(now);
        Some(Action::Replace { spec: self.record(wall, Some(&spec)), version })
    }

    /// The record this candidate writes over `old`.
    fn record(&self, wall: Timestamp, old: Option<&LeaseSpec>) -> LeaseSpec {
        let ours = old.and_then(|o| o.holder_identity.as_deref()) == Some(self.identity.as_str());
        let transitions = old.and_then(|o| o.lease_transitions).unwrap_or(0);
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.timing.duration.as_secs().max(1) as i32),
            acquire_time: if ours { old.and_then(|o| o.acquire_time.clone()) } else { Some(MicroTime(wall)) },
            renew_time: Some(MicroTime(wall)),
            lease_transitions: Some(if ours || old.is_none() { transitions } else { transitions + 1 }),
            ..Default::default()
        }
    }

    /// Stops leading; if the last record seen is ours, a record that names no holder
    /// (as client-go's `ReleaseOnCancel`), so a standby takes over on its next look.
    fn release(&mut self) -> Option<Action> {
        self.until = None;
        let (Seen { spec, version }, _) = self.observed.as_ref()?;
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return None;
        }
        let released = LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            lease_transitions: spec.lease_transitions,
            ..Default::default()
        };
        Some(Action::Replace { spec: released, version: version.clone() })
    }
}

#[cfg(test)]
mod properties;

#[cfg(test)]
mod tests {
    use super::*;

    fn timing() -> Timing {
        Timing::new(Duration::from_secs(15), None, None).unwrap()
    }

    fn wall() -> Timestamp {
        Timestamp::from_second(1_800_000_000).unwrap()
    }

    fn seen(holder: Option<&str>, version: &str) -> Seen {
        Seen {
            spec: LeaseSpec {
                holder_identity: holder.map(str::to_owned),
                lease_duration_seconds: Some(15),
                lease_transitions: Some(3),
                ..Default::default()
            },
            version: version.into(),
        }
    }

    fn look(e: &mut Elector, now: Instant, lease: Option<Seen>) -> Vec<Action> {
        e.step(Event::Seen { now, received: now, wall: wall(), lease })
    }

    fn written(action: &Action, version: &str) -> Seen {
        match action {
            Action::Create(spec) | Action::Replace { spec, .. } => Seen { spec: spec.clone(), version: version.into() },
            other => panic!("not a write: {other:?}"),
        }
    }

    #[test]
    fn timing_follows_client_go_and_refuses_impossible_settings() {
        assert_eq!(
            timing(),
            Timing {
                duration: Duration::from_secs(15),
                deadline: Duration::from_secs(10),
                retry: Duration::from_secs(2)
            }
        );
        let s = Duration::from_secs;
        assert!(Timing::new(s(15), Some(s(15)), None).unwrap_err().contains("renew deadline"));
        assert!(Timing::new(s(15), Some(s(5)), Some(s(5))).unwrap_err().contains("retry period"));
        assert!(Timing::new(Duration::from_millis(500), None, None).is_err());
        assert!(Timing::new(Duration::from_millis(1500), None, None).unwrap_err().contains("whole seconds"));
    }

    #[test]
    fn a_missing_lease_is_created_and_leadership_starts_when_the_write_lands() {
        let t0 = Instant::now();
        let mut e = Elector::new("a".into(), timing());
        let actions = look(&mut e, t0, None);
        assert!(matches!(&actions[..], [Action::Create(spec)] if spec.holder_identity.as_deref() == Some("a")));
        assert!(!e.leading(t0), "not before the write succeeds");
        assert_eq!(e.step(Event::Wrote(written(&actions[0], "1"))), vec![Action::Lead(true)]);
        assert!(e.leading(t0 + Duration::from_secs(9)));
        assert_eq!(e.until(), Some(t0 + Duration::from_secs(10)));
    }

    #[test]
    fn a_held_lease_is_taken_only_after_its_duration_as_observed_here() {
        let t0 = Instant::now();
        let mut e = Elector::new("b".into(), timing());
        assert_eq!(look(&mut e, t0, Some(seen(Some("a"), "5"))), vec![]);
        // The same record ten seconds on: the holder may still be alive.
        assert_eq!(look(&mut e, t0 + Duration::from_secs(10), Some(seen(Some("a"), "5"))), vec![]);
        // A renewal restarts the count, whatever its timestamps say.
        let mut renewed = seen(Some("a"), "6");
        renewed.spec.renew_time = Some(MicroTime(wall()));
        assert_eq!(look(&mut e, t0 + Duration::from_secs(14), Some(renewed.clone())), vec![]);
        assert_eq!(look(&mut e, t0 + Duration::from_secs(28), Some(renewed.clone())), vec![]);
        let actions = look(&mut e, t0 + Duration::from_secs(29), Some(renewed));
        match &actions[..] {
            [Action::Replace { spec, version }] => {
                assert_eq!(version, "6", "the write names the version read");
                assert_eq!(spec.holder_identity.as_deref(), Some("b"));
                assert_eq!(spec.lease_transitions, Some(4), "a new holder counts a transition");
                assert_eq!(spec.acquire_time, Some(MicroTime(wall())));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_released_lease_is_taken_at_once() {
        let t0 = Instant::now();
        let mut e = Elector::new("b".into(), timing());
        assert!(matches!(&look(&mut e, t0, Some(seen(None, "7")))[..], [Action::Replace { .. }]));
        let mut empty = seen(Some(""), "8");
        empty.spec.holder_identity = Some(String::new());
        let mut f = Elector::new("b".into(), timing());
        assert!(matches!(&look(&mut f, t0, Some(empty))[..], [Action::Replace { .. }]));
    }

    #[test]
    fn a_leader_that_cannot_renew_stops_at_the_deadline_before_anyone_can_take_over() {
        let t0 = Instant::now();
        let mut leader = Elector::new("a".into(), timing());
        let mut standby = Elector::new("b".into(), timing());
        let create = look(&mut leader, t0, None);
        let record = written(&create[0], "1");
        leader.step(Event::Wrote(record.clone()));
        // The standby sees the record a little later.
        let seen_at = t0 + Duration::from_millis(300);
        assert_eq!(look(&mut standby, seen_at, Some(record.clone())), vec![]);
        // Then the host cluster becomes unreachable to the leader.
        for s in [2, 4, 6, 8] {
            assert_eq!(leader.step(Event::Unseen { now: t0 + Duration::from_secs(s) }), vec![]);
        }
        assert!(leader.leading(t0 + Duration::from_millis(9_999)));
        assert_eq!(leader.step(Event::Tick { now: t0 + Duration::from_secs(10) }), vec![Action::Lead(false)]);
        assert!(!leader.leading(t0 + Duration::from_secs(10)));
        // The standby may take it only later, and the leader stopped before then.
        assert_eq!(look(&mut standby, seen_at + Duration::from_millis(14_999), Some(record.clone())), vec![]);
        let take = look(&mut standby, seen_at + Duration::from_secs(15), Some(record));
        assert!(matches!(&take[..], [Action::Replace { .. }]));
    }

    #[test]
    fn renewing_keeps_leading_and_losing_a_write_race_does_not_lead() {
        let t0 = Instant::now();
        let mut e = Elector::new("a".into(), timing());
        let first = look(&mut e, t0, None);
        e.step(Event::Wrote(written(&first[0], "1")));
        let at = t0 + Duration::from_secs(2);
        let renew = look(&mut e, at, Some(written(&first[0], "1")));
        match &renew[..] {
            [Action::Replace { spec, .. }] => {
                assert_eq!(spec.lease_transitions, Some(0), "renewing is not a transition");
                assert_eq!(spec.acquire_time, Some(MicroTime(wall())));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(e.step(Event::Wrote(written(&renew[0], "2"))), vec![]);
        assert_eq!(e.until(), Some(at + Duration::from_secs(10)));
        // A candidate whose write conflicts does not lead.
        let mut b = Elector::new("b".into(), timing());
        look(&mut b, t0, Some(seen(None, "3")));
        assert_eq!(b.step(Event::WriteFailed { now: t0 }), vec![]);
        assert!(!b.leading(t0));
        // A stale success (no write pending) changes nothing.
        assert_eq!(b.step(Event::Wrote(seen(Some("b"), "4"))), vec![]);
        assert!(!b.leading(t0));
    }

    #[test]
    fn a_leader_that_sees_another_holder_stops_at_once() {
        let t0 = Instant::now();
        let mut e = Elector::new("a".into(), timing());
        let first = look(&mut e, t0, None);
        e.step(Event::Wrote(written(&first[0], "1")));
        assert_eq!(look(&mut e, t0 + Duration::from_secs(2), Some(seen(Some("b"), "9"))), vec![Action::Lead(false)]);
    }

    #[test]
    fn releasing_names_no_holder_only_when_the_lease_is_ours() {
        let t0 = Instant::now();
        let mut e = Elector::new("a".into(), timing());
        let first = look(&mut e, t0, None);
        e.step(Event::Wrote(written(&first[0], "1")));
        match &e.step(Event::Release)[..] {
            [Action::Replace { spec, .. }, Action::Lead(false)] => {
                assert_eq!(spec.holder_identity, None);
                assert_eq!(spec.lease_duration_seconds, Some(1));
            }
            other => panic!("{other:?}"),
        }
        let mut b = Elector::new("b".into(), timing());
        look(&mut b, t0, Some(seen(Some("a"), "2")));
        assert_eq!(b.step(Event::Release), vec![]);
    }

    #[test]
    fn a_record_is_observed_from_when_its_read_returns_not_from_when_it_was_sent() {
        // A one-second lease: 667 ms deadline, and a read may take up to 667 ms.
        let timing = Timing::new(Duration::from_secs(1), None, None).unwrap();
        let ms = Duration::from_millis;
        let t0 = Instant::now();
        let mut leader = Elector::new("a".into(), timing);
        let mut standby = Elector::new("b".into(), timing);
        let create = look(&mut leader, t0, None);
        leader.step(Event::Wrote(written(&create[0], "1")));
        // The standby's read is sent 600 ms before the leader renews, and answered after.
        let sent = t0 + ms(400);
        let renew = look(&mut leader, t0 + ms(1000), Some(written(&create[0], "1")));
        let renewed = written(&renew[0], "2");
        leader.step(Event::Wrote(renewed.clone()));
        assert_eq!(leader.until(), Some(t0 + ms(1000) + timing.deadline));
        let answered = t0 + ms(1010);
        assert_eq!(
            standby.step(Event::Seen { now: sent, received: answered, wall: wall(), lease: Some(renewed.clone()) }),
            vec![]
        );
        // The leader freezes. One lease duration after the standby *sent* that read, the
        // leader still holds; the standby must wait a duration from the answer.
        let at = sent + timing.duration;
        assert!(leader.leading(at));
        assert_eq!(look(&mut standby, at, Some(renewed.clone())), vec![]);
        let take = look(&mut standby, answered + timing.duration, Some(renewed));
        assert!(matches!(&take[..], [Action::Replace { .. }]));
        assert!(!leader.leading(answered + timing.duration));
    }
}
