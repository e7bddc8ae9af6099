//! The faults the soak injects, each with its way back.

use std::time::Duration;

use proptest::test_runner::TestRng;
use rand::RngExt;

use super::model::MEMBERS;
use super::world::World;

/// A kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// A member's API server SIGSTOPped: it accepts TCP and never answers.
    MemberFrozen,
    /// A member's API server SIGKILLed, started again when the fault ends.
    MemberKilled,
    /// The leader cut off from the host cluster that holds its Lease.
    HostCut,
    /// The leading replica SIGKILLed, started again when the fault ends.
    LeaderKilled,
    /// The leading replica SIGSTOPped.
    LeaderFrozen,
    /// The git daemon down: the controllers cannot fetch or push.
    GitDown,
    /// The Pull member's agent SIGSTOPped.
    AgentFrozen,
}

pub const KINDS: [Kind; 7] = [
    Kind::MemberFrozen,
    Kind::MemberKilled,
    Kind::HostCut,
    Kind::LeaderKilled,
    Kind::LeaderFrozen,
    Kind::GitDown,
    Kind::AgentFrozen,
];

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::MemberFrozen => "member-frozen",
            Kind::MemberKilled => "member-killed",
            Kind::HostCut => "host-cut",
            Kind::LeaderKilled => "leader-killed",
            Kind::LeaderFrozen => "leader-frozen",
            Kind::GitDown => "git-down",
            Kind::AgentFrozen => "agent-frozen",
        }
    }
}

/// One fault of the schedule: what, on which target, for how long.
#[derive(Clone, Debug)]
pub struct Fault {
    pub kind: Kind,
    /// A member index for member faults; a replica index for leader faults, once known.
    pub target: usize,
    pub lasts: Duration,
}

impl Fault {
    /// The next fault of the seeded schedule: every kind in turn in a shuffled order,
    /// so a short run still sees each kind; 3 to 10 s long.
    pub fn draw(rng: &mut TestRng, round: &mut Vec<Kind>) -> Self {
        if round.is_empty() {
            *round = KINDS.to_vec();
            for i in (1..round.len()).rev() {
                round.swap(i, rng.random_range(0..=i));
            }
        }
        let kind = round.pop().unwrap();
        let target = rng.random_range(0..MEMBERS.len());
        Self { kind, target, lasts: Duration::from_millis(rng.random_range(3_000..10_000)) }
    }

    /// The member this fault stops from converging, when it stops one alone: every
    /// other member must go on converging while it lasts.
    pub fn stalls(&self) -> Option<usize> {
        match self.kind {
            Kind::MemberFrozen | Kind::MemberKilled => Some(self.target),
            Kind::AgentFrozen => Some(MEMBERS.len() - 1),
            _ => None,
        }
    }

    /// What it hits, for the log.
    pub fn describe(&self, world: &World) -> String {
        match self.kind {
            Kind::MemberFrozen | Kind::MemberKilled => MEMBERS[self.target].to_owned(),
            Kind::HostCut | Kind::LeaderKilled | Kind::LeaderFrozen => world.replicas[self.target].process.name.clone(),
            Kind::GitDown => "git daemon".to_owned(),
            Kind::AgentFrozen => world.agent.name.clone(),
        }
    }
}

/// What is needed to undo a fault.
pub enum Undo {
    Nothing,
    Thaw(&'static str),
    Restart(&'static str, Vec<std::ffi::OsString>),
    Restore(usize),
    StartReplica(usize),
    ThawReplica(usize),
    StartGit,
    ThawAgent,
}

/// Injects `fault`; a leader fault first finds the leader (and hits nothing when
/// none leads).
pub fn inject(world: &mut World, fault: &mut Fault) -> Undo {
    let member = MEMBERS[fault.target];
    let leader =
        matches!(fault.kind, Kind::HostCut | Kind::LeaderKilled | Kind::LeaderFrozen).then(|| world.leader()).flatten();
    match (fault.kind, leader) {
        (Kind::MemberFrozen, _) => {
            world.members().freeze(member, true);
            Undo::Thaw(member)
        }
        (Kind::MemberKilled, _) => Undo::Restart(member, world.members().kill(member)),
        (Kind::HostCut, Some(i)) => {
            fault.target = i;
            world.replicas[i].host.cut();
            Undo::Restore(i)
        }
        (Kind::LeaderKilled, Some(i)) => {
            fault.target = i;
            world.replicas[i].process.kill();
            Undo::StartReplica(i)
        }
        (Kind::LeaderFrozen, Some(i)) => {
            fault.target = i;
            world.replicas[i].process.signal("STOP");
            Undo::ThawReplica(i)
        }
        (Kind::GitDown, _) => {
            world.repo.daemon.0.kill().unwrap();
            world.repo.daemon.0.wait().unwrap();
            Undo::StartGit
        }
        (Kind::AgentFrozen, _) => {
            world.agent.signal("STOP");
            Undo::ThawAgent
        }
        _ => Undo::Nothing,
    }
}

/// Ends a fault.
pub fn undo(world: &mut World, undo: Undo) {
    match undo {
        Undo::Nothing => {}
        Undo::Thaw(member) => world.members().freeze(member, false),
        Undo::Restart(member, args) => world.members().restart(member, &args),
        Undo::Restore(i) => world.replicas[i].host.restore(),
        Undo::StartReplica(i) => world.replicas[i].process.restart(),
        Undo::ThawReplica(i) => world.replicas[i].process.signal("CONT"),
        Undo::StartGit => world.repo.restart(),
        Undo::ThawAgent => world.agent.signal("CONT"),
    }
}
