use super::*;

mod properties;

const SOAK: i64 = 20_000;

fn settings(on_failure: OnFailure, max_failures: u32) -> Settings {
    Settings {
        min_success_ms: SOAK,
        progress_deadline_ms: 60_000,
        max_failures: Amount::Count(max_failures),
        on_failure,
    }
}

/// member1, then member2 and member3, then member4.
fn batches() -> Vec<Batch> {
    let batch = |wave: &str, clusters: &[&str]| Batch {
        wave: wave.into(),
        index: 0,
        clusters: clusters.iter().map(|c| c.to_string()).collect(),
    };
    vec![
        batch("canary", &["member1"]),
        batch("prod", &["member2", "member3"]),
        batch(crate::rollout::REST, &["member4"]),
    ]
}

fn targets(actions: &[Action]) -> Vec<(&str, &str)> {
    actions.iter().map(|Action::Target { cluster, revision }| (cluster.as_str(), revision.as_str())).collect()
}

fn revision(name: &str, now: i64) -> Event {
    Event::Revision { revision: name.into(), batches: batches(), now }
}

fn at(cluster: &str, revision: &str, healthy: bool, now: i64) -> Event {
    Event::Member { cluster: cluster.into(), at: Some(revision.into()), healthy, now }
}

/// A leading rollout whose last good revision is `r1`.
fn started(settings: &Settings) -> State {
    let mut state = State::new();
    state.step(settings, Event::Leading(true));
    let first = state.step(settings, revision("r1", 0));
    assert_eq!(targets(&first).len(), 4, "the first revision goes everywhere at once");
    state
}

#[test]
fn each_batch_moves_after_the_one_before_stood_healthy_for_the_soak() {
    let s = settings(OnFailure::Pause, 0);
    let mut state = started(&s);
    assert_eq!(targets(&state.step(&s, revision("r2", 1_000))), [("member1", "r2")]);
    assert_eq!(state.step(&s, at("member1", "r2", true, 5_000)), vec![]);
    assert_eq!(state.phase(), Phase::Soaking { batch: 0, since: 5_000 });
    assert_eq!(state.step(&s, Event::Tick(24_999)), vec![], "the soak is not over");
    assert_eq!(targets(&state.step(&s, Event::Tick(25_000))), [("member2", "r2"), ("member3", "r2")]);
    state.step(&s, at("member2", "r2", true, 26_000));
    // member3 turns healthy later; a member of the batch dropping restarts the soak.
    state.step(&s, at("member3", "r2", true, 30_000));
    state.step(&s, at("member2", "r2", false, 40_000));
    assert_eq!(state.phase(), Phase::Progressing { batch: 1, since: 25_000 });
    state.step(&s, at("member2", "r2", true, 41_000));
    assert_eq!(state.step(&s, Event::Tick(60_999)), vec![]);
    assert_eq!(targets(&state.step(&s, Event::Tick(61_000))), [("member4", "r2")]);
    state.step(&s, at("member4", "r2", true, 62_000));
    state.step(&s, Event::Tick(82_000));
    assert_eq!((state.phase(), state.last_good.as_deref()), (Phase::Idle, Some("r2")));
}

#[test]
fn a_failing_gate_halts_and_revert_sends_the_moved_members_back() {
    let s = settings(OnFailure::Revert, 0);
    let mut state = started(&s);
    state.step(&s, revision("r2", 0));
    state.step(&s, at("member1", "r2", true, 1_000));
    let halted = state.step(&s, Event::Gates { failing: Some("errors = 3 (max 1)".into()), now: 2_000 });
    assert_eq!(targets(&halted), [("member1", "r1")]);
    assert!(
        matches!(state.phase(), Phase::Halted { batch: 0, reverted: true, ref reason } if reason == "gate errors = 3 (max 1)")
    );
    assert_eq!(state.target("member1"), Some("r1"));
    assert_eq!(state.step(&s, Event::Tick(90_000)), vec![], "a halt holds");
    // Resumed after a revert: from the first batch again.
    state.step(&s, Event::Gates { failing: None, now: 91_000 });
    assert_eq!(targets(&state.step(&s, Event::Resume(91_000))), [("member1", "r2")]);
}

#[test]
fn pause_holds_the_moved_members_and_resume_goes_on() {
    let s = settings(OnFailure::Pause, 0);
    let mut state = started(&s);
    state.step(&s, revision("r2", 0));
    state.step(&s, at("member1", "r2", true, 1_000));
    assert_eq!(state.step(&s, Event::Gates { failing: Some("latency".into()), now: 2_000 }), vec![]);
    assert!(matches!(state.phase(), Phase::Halted { reverted: false, .. }));
    assert_eq!(state.target("member1"), Some("r2"), "held at the new revision");
    state.step(&s, Event::Gates { failing: None, now: 3_000 });
    assert_eq!(state.step(&s, Event::Resume(3_000)), vec![]);
    assert_eq!(state.phase(), Phase::Soaking { batch: 0, since: 3_000 });
    assert_eq!(targets(&state.step(&s, Event::Tick(23_000))).len(), 2);
    // A person's pause holds the next batch, not the soak.
    state.step(&s, Event::Pause(24_000));
    state.step(&s, at("member2", "r2", true, 24_000));
    state.step(&s, at("member3", "r2", true, 24_000));
    assert_eq!(state.step(&s, Event::Tick(90_000)), vec![]);
    assert_eq!(state.phase(), Phase::Waiting { batch: 2 });
    assert_eq!(targets(&state.step(&s, Event::Resume(91_000))), [("member4", "r2")]);
}

#[test]
fn the_progress_deadline_counts_failures_up_to_max_failures() {
    let s = Settings { progress_deadline_ms: 10_000, ..settings(OnFailure::Pause, 1) };
    let mut state = started(&s);
    state.step(&s, revision("r2", 0));
    state.step(&s, at("member1", "r2", true, 1_000));
    state.step(&s, Event::Tick(SOAK + 1_000));
    state.step(&s, at("member2", "r2", true, SOAK + 2_000));
    // member3 never turns healthy: one failure is tolerated.
    state.step(&s, Event::Tick(SOAK + 11_000));
    assert_eq!(state.phase(), Phase::Soaking { batch: 1, since: SOAK + 11_000 });
    assert_eq!(targets(&state.step(&s, Event::Tick(2 * SOAK + 11_000))), [("member4", "r2")]);
    // With none tolerated, the same halts.
    let strict = Settings { progress_deadline_ms: 10_000, ..settings(OnFailure::Pause, 0) };
    let mut state = started(&strict);
    state.step(&strict, revision("r2", 0));
    state.step(&strict, Event::Tick(10_000));
    assert!(matches!(state.phase(), Phase::Halted { batch: 0, ref reason, .. } if reason.contains("member1")));
}

#[test]
fn closed_windows_hold_a_batch_until_they_open() {
    let s = settings(OnFailure::Pause, 0);
    let mut state = started(&s);
    state.step(&s, Event::Windows { open: false, now: 0 });
    assert_eq!(state.step(&s, revision("r2", 0)), vec![]);
    assert_eq!(state.phase(), Phase::Waiting { batch: 0 });
    assert_eq!(targets(&state.step(&s, Event::Windows { open: true, now: 5_000 })), [("member1", "r2")]);
}

#[test]
fn a_newer_revision_supersedes_the_rollout_and_a_revert_in_git_ends_it() {
    let s = settings(OnFailure::Pause, 0);
    let mut state = started(&s);
    state.step(&s, revision("r2", 0));
    state.step(&s, at("member1", "r2", true, 0));
    state.step(&s, Event::Tick(SOAK));
    // member1..member3 run r2; r3 sends member2 and member3 back and starts at member1.
    let superseded = state.step(&s, revision("r3", SOAK + 1));
    assert_eq!(targets(&superseded), [("member2", "r1"), ("member3", "r1"), ("member1", "r3")]);
    // Git goes back to r1: the moved member goes back, and nothing rolls out.
    assert_eq!(targets(&state.step(&s, revision("r1", SOAK + 2))), [("member1", "r1")]);
    assert_eq!((state.phase(), state.last_good.as_deref()), (Phase::Idle, Some("r1")));
}

#[test]
fn nothing_is_sent_without_the_lease_and_a_new_leader_sends_every_target() {
    let s = settings(OnFailure::Revert, 0);
    let mut state = started(&s);
    state.step(&s, Event::Leading(false));
    assert_eq!(state.step(&s, revision("r2", 0)), vec![]);
    assert_eq!(state.phase(), Phase::Waiting { batch: 0 }, "no batch starts without the lease");
    let led = state.step(&s, Event::Leading(true));
    assert_eq!(targets(&led), [("member1", "r1"), ("member2", "r1"), ("member3", "r1"), ("member4", "r1")]);
    assert_eq!(targets(&state.step(&s, Event::Tick(1))), [("member1", "r2")]);
    // The state survives a round trip through JSON, as it is kept in the host cluster.
    let kept: State = serde_json::from_value(serde_json::to_value(&state).unwrap()).unwrap();
    assert_eq!((kept.phase(), kept.target("member1"), kept.leading), (state.phase(), Some("r2"), false));
}
