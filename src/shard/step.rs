//! The pure decision of sharding: from what one replica saw of the membership Leases
//! (its own, renewed or not; the others', listed), which members it owns now and until
//! when it may write to them. Times are this process's monotonic clock only; another
//! replica's record is aged from when this process first saw it change, as leader
//! election ages the leader's (`crate::leader::elect`), so clock skew between nodes
//! cannot give one member two writers.
//!
//! - A replica owns nothing until its own Lease has been held for the renew deadline
//!   past the answer to the write that created it (*joining*): every replica that has
//!   not listed it by then has stopped writing, since its own right to write lapses a
//!   renew deadline after the start of the last round in which it listed.
//! - Its right to write lapses a renew deadline after the start of its last round that
//!   renewed its Lease and listed the others; a replica cut off from the host cluster
//!   stops before any other takes its members.
//! - Another replica counts as live until a list shows its record unchanged for the
//!   lease duration as this process observed it (judged at that list, never by time
//!   passing since: the record may have changed unseen); a released Lease is gone at
//!   once.
//! - Members go to the live replicas (this one included) by rendezvous hashing
//!   ([`super::assign`]); a replica newly seen takes its share from the others at once
//!   (they stop) while it only starts after joining.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use crate::leader::elect::Timing;

/// Another replica's Lease as listed: who holds it and its version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The replica (the Lease's holder).
    pub identity: String,
    /// Its `resourceVersion`: a renewal changes it.
    pub version: String,
}

/// What one round saw.
#[derive(Debug, Clone)]
pub enum Event {
    /// A round: `started` before its first request, `received` after its last answer;
    /// whether this replica's Lease was written, and the others' Leases if they could
    /// be listed.
    Round { started: Instant, received: Instant, renewed: bool, listed: Option<Vec<Listed>> },
    /// The members the newest render names (those this instance applies).
    Members(BTreeSet<String>),
}

/// Where this replica stands at one instant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shard {
    /// The live replicas as this one sees them, itself included, sorted.
    pub replicas: Vec<String>,
    /// The members it owns now.
    pub owned: BTreeSet<String>,
    /// Until when it may write to them (none: it owns nothing).
    pub until: Option<Instant>,
    /// Whether it is still joining (it owns nothing until it has joined).
    pub joining: bool,
}

#[derive(Debug, Clone)]
struct Peer {
    version: String,
    changed: Instant,
}

/// One replica's view of the membership.
#[derive(Debug, Clone)]
pub struct Membership {
    me: String,
    timing: Timing,
    /// When this incarnation's membership began (the answer to its first write, or to
    /// the first write after its right lapsed).
    joined: Option<Instant>,
    /// The start of the last round that renewed its Lease and listed the others.
    held: Option<Instant>,
    /// When the answer to the last list of the others arrived: a peer's record is aged
    /// as of then, never beyond what was seen (a peer renewed since would look dead).
    listed: Option<Instant>,
    peers: BTreeMap<String, Peer>,
    members: BTreeSet<String>,
}

impl Membership {
    /// Replica `me`, with the Leases' timing.
    pub fn new(me: String, timing: Timing) -> Self {
        Self { me, timing, joined: None, held: None, listed: None, peers: BTreeMap::new(), members: BTreeSet::new() }
    }

    /// Takes one event.
    pub fn step(&mut self, event: Event) {
        match event {
            Event::Members(members) => self.members = members,
            Event::Round { started, received, renewed, listed } => {
                if renewed {
                    // A right that lapsed (or never was) begins again: others may have
                    // taken this replica's members meanwhile.
                    let lapsed = self.held.is_none_or(|held| started >= held + self.timing.deadline);
                    if self.joined.is_none() || lapsed {
                        self.joined = Some(received);
                    }
                }
                if let Some(listed) = listed {
                    self.see(listed, received);
                    self.listed = Some(received);
                    if renewed {
                        self.held = Some(started);
                    }
                }
            }
        }
    }

    fn see(&mut self, listed: Vec<Listed>, received: Instant) {
        let listed: BTreeMap<String, String> =
            listed.into_iter().filter(|l| l.identity != self.me).map(|l| (l.identity, l.version)).collect();
        self.peers.retain(|identity, _| listed.contains_key(identity));
        for (identity, version) in listed {
            match self.peers.get_mut(&identity) {
                Some(peer) if peer.version == version => {}
                Some(peer) => *peer = Peer { version, changed: received },
                None => {
                    self.peers.insert(identity, Peer { version, changed: received });
                }
            }
        }
    }

    /// Until when this replica may write (none once it may not).
    fn until(&self, now: Instant) -> Option<Instant> {
        self.held.map(|held| held + self.timing.deadline).filter(|until| now < *until)
    }

    /// The live replicas at `now`, this one included while it holds its Lease.
    pub fn replicas(&self, now: Instant) -> Vec<String> {
        let mut live: Vec<String> = self
            .peers
            .iter()
            .filter(|(_, p)| self.listed.is_some_and(|at| at < p.changed + self.timing.duration))
            .map(|(identity, _)| identity.clone())
            .collect();
        if self.until(now).is_some() {
            live.push(self.me.clone());
        }
        live.sort();
        live
    }

    /// Where this replica stands at `now`.
    pub fn shard(&self, now: Instant) -> Shard {
        let replicas = self.replicas(now);
        let until = self.until(now);
        let joining = self.joined.is_none_or(|joined| now < joined + self.timing.deadline);
        if until.is_none() || joining {
            return Shard { replicas, owned: BTreeSet::new(), until: None, joining };
        }
        let owned = self
            .members
            .iter()
            .filter(|m| super::assign::owner(m, &replicas) == Some(self.me.as_str()))
            .cloned()
            .collect();
        Shard { replicas, owned, until, joining }
    }
}

#[cfg(test)]
mod properties;

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn timing() -> Timing {
        Timing::new(Duration::from_secs(15), None, None).unwrap()
    }

    fn members(n: usize) -> BTreeSet<String> {
        (0..n).map(|i| format!("member{i}")).collect()
    }

    fn round(m: &mut Membership, at: Instant, others: &[(&str, &str)]) {
        let listed = others.iter().map(|(i, v)| Listed { identity: i.to_string(), version: v.to_string() }).collect();
        m.step(Event::Round { started: at, received: at, renewed: true, listed: Some(listed) });
    }

    /// Rounds every retry period from `from` until `to` (inclusive of `from`); the time
    /// of the last.
    fn rounds(m: &mut Membership, from: Instant, to: Instant, others: &[(&str, &str)]) -> Instant {
        let mut at = from;
        loop {
            round(m, at, others);
            if at + timing().retry > to {
                return at;
            }
            at += timing().retry;
        }
    }

    #[test]
    fn a_lone_replica_owns_every_member_once_it_has_joined() {
        let t = timing();
        let start = Instant::now();
        let mut a = Membership::new("a".into(), t);
        a.step(Event::Members(members(4)));
        round(&mut a, start, &[]);
        assert!(a.shard(start).owned.is_empty() && a.shard(start).joining, "joining");
        let last = rounds(&mut a, start, start + t.deadline, &[]);
        assert!(a.shard(start + t.deadline - Duration::from_millis(1)).owned.is_empty(), "still joining");
        let shard = a.shard(start + t.deadline);
        assert_eq!(shard.owned, members(4));
        assert_eq!(shard.until, Some(last + t.deadline));
        assert!(a.shard(last + t.deadline).owned.is_empty(), "the right lapses without a renewal");
    }

    #[test]
    fn a_newcomer_s_share_leaves_at_once_and_a_silent_peer_s_share_comes_after_the_duration() {
        let t = timing();
        let start = Instant::now();
        let mut a = Membership::new("a".into(), t);
        a.step(Event::Members(members(40)));
        let at = rounds(&mut a, start, start + t.deadline, &[]);
        assert_eq!(a.shard(at).owned.len(), 40);
        // b appears: a gives b its share at once.
        let seen = at + t.retry;
        round(&mut a, seen, &[("b", "1")]);
        let shard = a.shard(seen);
        assert_eq!(shard.replicas, ["a", "b"]);
        assert!(!shard.owned.is_empty() && shard.owned.len() < 40, "{shard:?}");
        // b renews once, then goes silent: its share comes back once its record is a
        // lease duration old as a saw it.
        let renewed = seen + t.retry;
        round(&mut a, renewed, &[("b", "2")]);
        let before = rounds(&mut a, renewed, renewed + t.duration - Duration::from_millis(1), &[("b", "2")]);
        assert!(a.shard(before).owned.len() < 40, "b still live");
        round(&mut a, renewed + t.duration, &[("b", "2")]);
        assert_eq!(a.shard(renewed + t.duration).owned.len(), 40, "b's record unchanged for the duration");
        // A released (deleted) Lease is gone at once.
        let next = renewed + t.duration + t.retry;
        round(&mut a, next, &[("c", "1")]);
        assert!(a.shard(next).owned.len() < 40);
        round(&mut a, next + t.retry, &[]);
        assert_eq!(a.shard(next + t.retry).owned.len(), 40);
    }

    #[test]
    fn a_replica_whose_right_lapsed_joins_again() {
        let t = timing();
        let start = Instant::now();
        let mut a = Membership::new("a".into(), t);
        a.step(Event::Members(members(3)));
        let at = rounds(&mut a, start, start + t.deadline, &[]);
        assert_eq!(a.shard(at).owned.len(), 3);
        // Cut off from the host for longer than the deadline, then back.
        let back = at + t.deadline * 2;
        round(&mut a, back, &[]);
        assert!(a.shard(back).joining && a.shard(back).owned.is_empty());
        let joined = rounds(&mut a, back, back + t.deadline, &[]);
        assert_eq!(a.shard(joined).owned.len(), 3);
    }
}
