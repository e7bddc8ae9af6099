//! What a rollout keeps (in the host cluster, by the loop): where it stands, its
//! batches' times, and what its members were seen at.

use std::collections::{BTreeMap, BTreeSet};

use super::super::Batch;

/// Where the rollout stands, as status and metrics show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "state", rename_all = "camelCase")]
pub enum Phase {
    /// No rollout: every member runs the last good revision.
    Idle,
    /// Batch `batch`'s members were sent the revision at `since`.
    Progressing { batch: usize, since: i64 },
    /// Every member of batch `batch` has stood at the revision, healthy, since `since`.
    Soaking { batch: usize, since: i64 },
    /// Batch `batch` waits for a window (or a resume).
    Waiting { batch: usize },
    /// Halted at batch `batch`: why; the moved members hold (`Pause`) or went back.
    Halted { batch: usize, reason: String, reverted: bool },
}

/// The rollout in progress.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Active {
    /// The revision rolling out.
    pub revision: String,
    /// Its batches, in order.
    pub batches: Vec<Batch>,
    /// Where it stands.
    pub phase: Phase,
    /// When the current batch was sent the revision (its progress deadline runs from it).
    pub batch_started: i64,
    /// Members sent the revision.
    pub moved: BTreeSet<String>,
    /// Members of the current batch counted as failed.
    pub failed: BTreeSet<String>,
    /// When each batch started, began to soak and was done (status shows the times).
    #[serde(default)]
    pub times: Vec<Times>,
}

/// When a batch was sent the revision, when its soak began (its members all standing
/// at it, healthy; the latest start), and when it was done.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Times {
    /// Sent the revision.
    pub started: i64,
    /// The soak began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soaking: Option<i64>,
    /// Soaked, with the gates passing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done: Option<i64>,
}

/// A rollout that reached every batch, as status shows it afterwards.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Finished {
    /// The revision that rolled out.
    pub revision: String,
    /// Its batches.
    pub batches: Vec<Batch>,
    /// Their times.
    pub times: Vec<Times>,
}

impl Active {
    /// Batch `batch`'s times, made as it is reached.
    pub(super) fn times(&mut self, batch: usize) -> &mut Times {
        if self.times.len() <= batch {
            self.times.resize(batch + 1, Times::default());
        }
        &mut self.times[batch]
    }
}

/// What the rollout remembers (kept in the host cluster by the loop).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct State {
    /// The revision every member ran when the last rollout finished.
    pub last_good: Option<String>,
    /// The rollout in progress.
    pub active: Option<Active>,
    /// What each member was last observed at, and whether it was healthy.
    pub members: BTreeMap<String, (Option<String>, bool)>,
    /// The failing gate, if one fails.
    pub gates_failing: Option<String>,
    /// Whether the windows let a batch start.
    pub windows_open: bool,
    /// Paused by a person.
    pub paused: bool,
    /// The last rollout that reached every batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<Finished>,
    /// The revision a person aborted: not rolled out again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aborted: Option<String>,
    /// Whether this instance leads (not kept: a new leader learns it).
    #[serde(skip)]
    pub leading: bool,
}

impl State {
    /// A rollout that knows nothing yet; windows open until told otherwise.
    pub fn new() -> Self {
        Self { windows_open: true, ..Self::default() }
    }

    /// The revision `cluster` should run for the governed templates.
    pub fn target(&self, cluster: &str) -> Option<&str> {
        match &self.active {
            Some(active) if active.moved.contains(cluster) && !reverted(active) => Some(&active.revision),
            _ => self.last_good.as_deref(),
        }
    }

    /// Where the rollout stands.
    pub fn phase(&self) -> Phase {
        self.active.as_ref().map_or(Phase::Idle, |a| a.phase.clone())
    }
}

/// Whether the rollout halted and sent its moved members back.
pub(super) fn reverted(active: &Active) -> bool {
    matches!(active.phase, Phase::Halted { reverted: true, .. })
}
