//! What `/status` shows of each rollout (`rollouts`, by policy): where it stands, its
//! waves with their times, its gates' last readings, and what its members were seen at.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One RolloutPolicy's rollout.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    /// `idle`, `waiting`, `progressing`, `soaking` or `halted`.
    pub state: String,
    /// The revision rolling out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// The revision every member ran when the last rollout ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_good: Option<String>,
    /// The wave of the batch it stands at, and that batch's number (from 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wave: Option<String>,
    /// See `wave`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<usize>,
    /// Since when it stands where it stands (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// When the soak under way ends, if the members keep standing and the gates pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soak_until: Option<String>,
    /// Why it halted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Halted, and the moved members sent back to the last good revision.
    #[serde(default)]
    pub reverted: bool,
    /// Paused by `flotilla rollout pause`.
    #[serde(default)]
    pub paused: bool,
    /// Whether the windows let a batch start now.
    #[serde(default)]
    pub windows_open: bool,
    /// Its batches in order, with their times.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waves: Vec<WaveStatus>,
    /// Each gate's last reading.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub gates: BTreeMap<String, GateStatus>,
    /// Members sent the revision.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moved: Vec<String>,
    /// Members of the current batch counted as failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
    /// What each member observed was seen at: `at <revision>` or `behind`, and health.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub members: BTreeMap<String, String>,
    /// The last rollout that reached every batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<FinishedStatus>,
}

/// One batch of a rollout.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WaveStatus {
    /// Its wave.
    pub wave: String,
    /// Its clusters.
    pub clusters: Vec<String>,
    /// Sent the revision (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<String>,
    /// Its soak began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soaking: Option<String>,
    /// Done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done: Option<String>,
}

/// A gate's last reading.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GateStatus {
    /// The value, if one was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// Whether it passes.
    pub passing: bool,
    /// Why no value was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A rollout that reached every batch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FinishedStatus {
    /// The revision.
    pub revision: String,
    /// Its batches, with their times.
    pub waves: Vec<WaveStatus>,
}
