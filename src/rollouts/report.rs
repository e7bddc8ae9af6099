//! What the rollout loop reports: each policy's rollout in `/status` `rollouts`, and
//! `flotilla_rollout_wave` / `flotilla_rollout_state`.

use std::collections::BTreeMap;

use flotilla_core::model::Plan;
use flotilla_core::rollout::step::{Phase, State, Times};
use flotilla_core::rollout::{Batch, PolicyId};

use super::gates::Reading;
use crate::forge::{CommitState, Status};
use crate::metrics::{Metrics, PolicyLabel, RolloutStateLabels};
use crate::status::{Board, FinishedStatus, GateStatus, RolloutStatus, WaveStatus};

const STATES: [&str; 5] = ["idle", "waiting", "progressing", "soaking", "halted"];

/// Writes every policy's rollout to the board and the metrics; forgets the series of
/// policies that are gone.
pub fn report(
    board: &Board,
    metrics: &Metrics,
    (policies, head): (&BTreeMap<PolicyId, State>, Option<&Plan>),
    readings: &BTreeMap<PolicyId, BTreeMap<String, Reading>>,
) {
    let mut shown = BTreeMap::new();
    for (id, state) in policies {
        let spec = head.and_then(|plan| id.find(&plan.loaded)).map(|p| &p.spec);
        let soak = spec.map_or(0, |s| flotilla_core::rollout::settings(s).min_success_ms);
        let mut status = status(state, soak);
        status.gates = readings.get(id).map(gate_statuses).unwrap_or_default();
        let name = id.to_string();
        metrics.rollout_wave.get_or_create(&PolicyLabel { policy: name.clone() }).set(status.batch.unwrap_or(0) as i64);
        for each in STATES {
            let labels = RolloutStateLabels { policy: name.clone(), state: each.into() };
            metrics.rollout_state.get_or_create(&labels).set(i64::from(each == status.state));
        }
        shown.insert(name, status);
    }
    let gone: Vec<String> = board.update(|s| {
        let gone = s.rollouts.keys().filter(|k| !shown.contains_key(*k)).cloned().collect();
        s.rollouts = shown;
        gone
    });
    for policy in gone {
        metrics.rollout_wave.remove(&PolicyLabel { policy: policy.clone() });
        for each in STATES {
            metrics.rollout_state.remove(&RolloutStateLabels { policy: policy.clone(), state: each.into() });
        }
    }
}

/// One policy's rollout as `/status` shows it; `soak` is its `minSuccessTime` (ms).
pub fn status(state: &State, soak: i64) -> RolloutStatus {
    let mut out = RolloutStatus {
        last_good: state.last_good.clone(),
        paused: state.paused,
        windows_open: state.windows_open,
        state: "idle".into(),
        finished: state
            .finished
            .as_ref()
            .map(|f| FinishedStatus { revision: f.revision.clone(), waves: waves(&f.batches, &f.times) }),
        ..RolloutStatus::default()
    };
    for (member, (at, healthy)) in &state.members {
        let at = at.as_deref().map_or("behind".to_owned(), |r| format!("at {r}"));
        out.members.insert(member.clone(), format!("{at}, {}", if *healthy { "healthy" } else { "not healthy" }));
    }
    let Some(active) = &state.active else { return out };
    out.revision = Some(active.revision.clone());
    out.waves = waves(&active.batches, &active.times);
    out.moved = active.moved.iter().cloned().collect();
    out.failed = active.failed.iter().cloned().collect();
    let (name, batch, since) = match &active.phase {
        Phase::Idle => ("idle", None, None),
        Phase::Waiting { batch } => ("waiting", Some(*batch), None),
        Phase::Progressing { batch, since } => ("progressing", Some(*batch), Some(*since)),
        Phase::Soaking { batch, since } => {
            out.soak_until = at(since + soak);
            ("soaking", Some(*batch), Some(*since))
        }
        Phase::Halted { batch, reason, reverted } => {
            (out.reason, out.reverted) = (Some(reason.clone()), *reverted);
            ("halted", Some(*batch), None)
        }
    };
    out.state = name.into();
    out.since = since.and_then(at);
    out.batch = batch.map(|b| b + 1);
    out.wave = batch.and_then(|b| active.batches.get(b)).map(|b| b.wave.clone());
    out
}

fn waves(batches: &[Batch], times: &[Times]) -> Vec<WaveStatus> {
    batches
        .iter()
        .enumerate()
        .map(|(i, batch)| {
            let times = times.get(i);
            WaveStatus {
                wave: batch.wave.clone(),
                clusters: batch.clusters.clone(),
                started: times.and_then(|t| at(t.started)),
                soaking: times.and_then(|t| t.soaking).and_then(at),
                done: times.and_then(|t| t.done).and_then(at),
            }
        })
        .collect()
}

fn gate_statuses(readings: &BTreeMap<String, Reading>) -> BTreeMap<String, GateStatus> {
    readings
        .iter()
        .map(|(name, r)| (name.clone(), GateStatus { value: r.value, passing: r.passing, error: r.error.clone() }))
        .collect()
}

/// Unix milliseconds as RFC 3339.
fn at(ms: i64) -> Option<String> {
    k8s_openapi::jiff::Timestamp::from_millisecond(ms).ok().map(|t| t.to_string())
}

/// The commit status a rollout gives the commit it rolls out (context
/// `flotilla/rollout/<policy>`): pending with the wave it stands at, failure with why it
/// halted, success once it reached every wave. Repository text in it is made visible
/// (forges show statuses as plain text). `None` while it never rolled anything out.
pub fn commit_status(id: &PolicyId, state: &State) -> Option<(String, Status)> {
    use flotilla_core::escape::visible;
    let context = format!("flotilla/rollout/{}", visible(&id.short()));
    let Some(active) = &state.active else {
        let finished = state.finished.as_ref()?;
        let description = format!("rolled out in {} waves", finished.batches.len());
        return Some((finished.revision.clone(), Status { context, state: CommitState::Success, description }));
    };
    let of = |batch: usize| {
        let wave = active.batches.get(batch).map_or(String::new(), |b| visible(&b.wave).into_owned());
        format!("wave {} of {} ({wave})", batch + 1, active.batches.len())
    };
    let (state_, description) = match &active.phase {
        Phase::Idle => return None,
        Phase::Waiting { batch } if state.paused => (CommitState::Pending, format!("{}: paused", of(*batch))),
        Phase::Waiting { batch } => (CommitState::Pending, format!("{}: waiting for a window", of(*batch))),
        Phase::Progressing { batch, .. } => (CommitState::Pending, format!("{}: applying", of(*batch))),
        Phase::Soaking { batch, .. } => (CommitState::Pending, format!("{}: soaking", of(*batch))),
        Phase::Halted { batch, reason, reverted } => {
            let then = if *reverted { "; reverted" } else { "; paused" };
            (CommitState::Failure, format!("halted at {}: {}{then}", of(*batch), visible(reason)))
        }
    };
    Some((active.revision.clone(), Status { context, state: state_, description }))
}

#[cfg(test)]
mod tests {
    use flotilla_core::rollout::Batch;
    use flotilla_core::rollout::step::{Active, Phase, State};

    use super::*;

    #[test]
    fn a_rollout_tells_its_commit_where_it_stands() {
        let id = PolicyId { namespace: Some("shop".into()), name: "web".into() };
        let batch = |wave: &str| Batch { wave: wave.into(), index: 0, clusters: vec!["m1".into()] };
        let mut state = State::new();
        assert_eq!(commit_status(&id, &state), None);
        state.active = Some(Active {
            revision: "abc".into(),
            batches: vec![batch("canary"), batch("rest\u{1b}[2J")],
            phase: Phase::Soaking { batch: 0, since: 0 },
            batch_started: 0,
            moved: Default::default(),
            failed: Default::default(),
            times: Vec::new(),
        });
        let (sha, status) = commit_status(&id, &state).unwrap();
        assert_eq!((sha.as_str(), status.context.as_str()), ("abc", "flotilla/rollout/shop/web"));
        assert_eq!(
            (status.state, status.description.as_str()),
            (CommitState::Pending, "wave 1 of 2 (canary): soaking")
        );
        let reason = "gate errors = 5 (max 1)".to_owned();
        state.active.as_mut().unwrap().phase = Phase::Halted { batch: 1, reason, reverted: true };
        let (_, status) = commit_status(&id, &state).unwrap();
        assert_eq!(status.state, CommitState::Failure);
        assert!(!status.description.contains('\u{1b}'), "{}", status.description);
        assert!(status.description.ends_with("gate errors = 5 (max 1); reverted"), "{}", status.description);
    }
}
