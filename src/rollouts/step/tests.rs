use flotilla_core::model::{ClusterState, Limits, RepoFiles};

use super::*;

mod properties;

/// Three members; `web` (governed, canary member1 then the rest) and `tools` (not).
const REPO: &str = r#"
apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata: {name: member1}
spec: {syncMode: Push}
---
apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata: {name: member2}
spec: {syncMode: Push}
---
apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata: {name: member3}
spec: {syncMode: Push}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: web, namespace: shop}
data: {color: COLOR}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: tools, namespace: shop}
data: {version: "VERSION"}
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: all, namespace: shop}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]
  placement: {clusterAffinity: {clusterNames: [member1, member2, member3]}}
"#;

const POLICY: &str = r#"
---
apiVersion: flotilla.dev/v1alpha1
kind: RolloutPolicy
metadata: {name: web, namespace: shop}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap, name: web}]
  waves: [{name: canary, clusterAffinity: {clusterNames: [member1]}}]
  minSuccessTime: 20s
"#;

pub(super) fn plan(revision: &str, color: &str, version: &str, policy: bool) -> Arc<Plan> {
    let mut text = REPO.replace("COLOR", color).replace("VERSION", version);
    if policy {
        text += POLICY;
    }
    let mut files = RepoFiles { revision: revision.into(), ..Default::default() };
    files.files.insert("fleet.yaml".into(), text.into_bytes());
    Arc::new(flotilla_core::plan(&files, &ClusterState::default(), &Limits::default()).unwrap())
}

pub(super) fn web() -> PolicyId {
    PolicyId { namespace: Some("shop".into()), name: "web".into() }
}

fn published(revision: &str, plan: &Arc<Plan>, now: i64) -> Event {
    Event::Published { revision: revision.into(), plan: plan.clone(), now }
}

/// The assignments among `actions`: per member, the revisions it is held at.
fn holds(actions: &[Action]) -> Vec<BTreeMap<String, Vec<String>>> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Assign(a) => {
                Some(a.holds.iter().map(|(m, h)| (m.clone(), h.iter().map(|h| h.revision.clone()).collect())).collect())
            }
            _ => None,
        })
        .collect()
}

/// A leading, loaded loop that has applied `r1` everywhere.
fn started() -> State {
    let mut state = State::new();
    state.step(Event::Leading(true));
    state.step(Event::Loaded(None));
    let first = state.step(published("r1", &plan("r1", "blue", "1", true), 0));
    assert_eq!(holds(&first), [BTreeMap::new()], "the first revision goes everywhere");
    state
}

fn observed(cluster: &str, at: &str, now: i64) -> Event {
    Event::Observed { policy: web(), cluster: cluster.into(), at: Some(at.into()), healthy: true, now }
}

#[test]
fn a_governed_change_reaches_the_canary_first_and_the_rest_after_its_soak() {
    let mut state = started();
    let r2 = plan("r2", "green", "2", true);
    let actions = state.step(published("r2", &r2, 1_000));
    let held: BTreeMap<String, Vec<String>> = [("member2", vec!["r1"]), ("member3", vec!["r1"])]
        .map(|(m, r)| (m.into(), r.iter().map(|r| r.to_string()).collect()))
        .into();
    assert_eq!(holds(&actions), std::slice::from_ref(&held));
    assert!(actions.iter().any(|a| matches!(a, Action::Save(_))), "the new wave is kept before it is sent");
    // Each hold names only the governed object: `tools` is already at r2 everywhere.
    let Some(Action::Assign(assignment)) = actions.iter().find(|a| matches!(a, Action::Assign(_))) else { panic!() };
    let keys: Vec<&str> = assignment.holds["member2"][0].keys.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(keys, ["web"]);
    // The canary stands at r2; nothing changes until its soak is over.
    assert!(holds(&state.step(observed("member1", "r2", 2_000))).is_empty());
    assert!(holds(&state.step(Event::Tick(21_999))).is_empty());
    assert_eq!(holds(&state.step(Event::Tick(22_000))), [BTreeMap::new()]);
}

#[test]
fn a_change_of_nothing_governed_moves_everywhere_and_keeps_the_soak() {
    let mut state = started();
    state.step(published("r2", &plan("r2", "green", "1", true), 1_000));
    state.step(observed("member1", "r2", 2_000));
    // r3 changes only `tools`: it replaces r2 in the rollout, the soak goes on.
    let r3 = plan("r3", "green", "3", true);
    let actions = state.step(published("r3", &r3, 10_000));
    let assigned = holds(&actions);
    assert_eq!(assigned.len(), 1);
    assert_eq!(assigned[0]["member2"], ["r1"], "still held at the last good revision");
    let active = state.policies()[&web()].active.clone().unwrap();
    assert_eq!(active.revision, "r3");
    assert!(matches!(active.phase, rollout::step::Phase::Soaking { since: 2_000, .. }), "{:?}", active.phase);
    assert_eq!(holds(&state.step(Event::Tick(22_000))), [BTreeMap::new()]);
}

#[test]
fn a_new_leader_assigns_nothing_governed_before_it_reads_the_stored_state() {
    let mut old = started();
    old.step(published("r2", &plan("r2", "green", "1", true), 1_000));
    let stored = old.stored();

    let mut new = State::new();
    new.step(Event::Leading(true));
    let r2 = plan("r2", "green", "1", true);
    assert!(holds(&new.step(published("r2", &r2, 5_000))).is_empty(), "nothing before the state is read");
    // The held revision is rendered, then members get what the last leader gave them.
    let actions = new.step(Event::Loaded(Some(stored)));
    assert!(actions.iter().any(|a| matches!(a, Action::Render(r) if r == "r1")), "{actions:?}");
    assert!(holds(&actions).is_empty(), "not without r1's plan");
    let actions = new.step(Event::Rendered { revision: "r1".into(), plan: Ok(plan("r1", "blue", "1", true)) });
    assert_eq!(holds(&actions)[0]["member3"], ["r1"]);
}

#[test]
fn without_rollout_policies_publications_pass_as_they_come() {
    let mut state = State::new();
    state.step(Event::Leading(true));
    let actions = state.step(published("r1", &plan("r1", "blue", "1", false), 0));
    assert_eq!(holds(&actions), [BTreeMap::new()], "no wait for the stored state");
    assert!(!actions.iter().any(|a| matches!(a, Action::Save(_) | Action::Render(_))));
}

#[test]
fn a_held_revision_is_rendered_again_with_the_head_and_one_that_cannot_be_ends_the_rollout() {
    let mut state = started();
    let r2 = plan("r2", "green", "1", true);
    state.step(published("r2", &r2, 1_000));
    // The head rendered anew (a failover overlay): r1 is rendered anew alike.
    let actions = state.step(published("r2", &plan("r2", "green", "1", true), 2_000));
    assert!(actions.iter().any(|a| matches!(a, Action::Render(r) if r == "r1")), "{actions:?}");
    let actions = state.step(Event::Rendered { revision: "r1".into(), plan: Err("gone".into()) });
    assert!(actions.iter().any(|a| matches!(a, Action::Warn(w) if w.contains("cannot be rendered"))));
    assert_eq!(holds(&actions), [BTreeMap::new()], "every member gets the head");
}

#[test]
fn a_command_is_carried_out_once() {
    let mut state = started();
    state.step(published("r2", &plan("r2", "green", "1", true), 1_000));
    let pause = || Event::Command { policy: web(), id: 1, command: Command::Pause, now: 2_000 };
    state.step(pause());
    assert!(state.policies()[&web()].paused);
    state.step(Event::Command { policy: web(), id: 2, command: Command::Resume, now: 3_000 });
    state.step(pause());
    assert!(!state.policies()[&web()].paused, "command 1 was carried out already");
}

#[test]
fn an_aborted_revision_is_not_rolled_out_again_but_a_different_one_is() {
    let mut state = started();
    state.step(published("r2", &plan("r2", "green", "1", true), 1_000));
    let aborted = state.step(Event::Command { policy: web(), id: 1, command: Command::Abort, now: 2_000 });
    let back = holds(&aborted);
    assert_eq!(back.len(), 1);
    assert!(["member1", "member2", "member3"].iter().all(|m| back[0][*m] == ["r1"]), "{back:?}");
    // An unrelated commit (tools only) keeps web aborted; so does a new leader.
    state.step(published("r3", &plan("r3", "green", "3", true), 3_000));
    assert!(state.policies()[&web()].active.is_none());
    let mut new = State::new();
    new.step(Event::Leading(true));
    new.step(published("r3", &plan("r3", "green", "3", true), 4_000));
    let actions = new.step(Event::Loaded(Some(state.stored())));
    for action in actions.iter().filter_map(|a| if let Action::Render(r) = a { Some(r.clone()) } else { None }) {
        let color = if action == "r1" { "blue" } else { "green" };
        new.step(Event::Rendered { revision: action.clone(), plan: Ok(plan(&action, color, "1", true)) });
    }
    assert!(new.policies()[&web()].active.is_none(), "{:?}", new.policies()[&web()]);
    // A different change of web rolls out from the canary.
    new.step(published("r4", &plan("r4", "red", "3", true), 5_000));
    assert_eq!(new.policies()[&web()].active.as_ref().map(|a| a.revision.as_str()), Some("r4"));
}

#[test]
fn a_sharded_replica_follows_the_leader_s_state_until_it_leads_and_then_decides() {
    let mut leader = started();
    leader.step(published("r2", &plan("r2", "green", "1", true), 1_000));
    let stored = leader.stored();

    let mut replica = State::sharded();
    replica.step(Event::Leading(false));
    assert!(replica.following());
    let r2 = plan("r2", "green", "1", true);
    assert!(holds(&replica.step(published("r2", &r2, 2_000))).is_empty(), "nothing before the state is read");
    let actions = replica.step(Event::Loaded(Some(stored.clone())));
    assert!(actions.iter().any(|a| matches!(a, Action::Render(r) if r == "r1")), "{actions:?}");
    let assigned = replica.step(Event::Rendered { revision: "r1".into(), plan: Ok(plan("r1", "blue", "1", true)) });
    assert_eq!(holds(&assigned)[0]["member3"], ["r1"], "held where the leader holds it");
    assert!(!assigned.iter().any(|a| matches!(a, Action::Save(_))), "a follower saves nothing");
    replica.step(Event::Command { policy: web(), id: 9, command: Command::Abort, now: 3_000 });
    assert!(replica.policies()[&web()].active.is_some(), "commands are the leader's");

    // It wins the fleet's lease: it reads where the last leader stood, then decides.
    replica.step(Event::Leading(true));
    assert!(!replica.following());
    let resumed = replica.step(Event::Loaded(Some(stored)));
    assert!(!holds(&resumed).is_empty() || resumed.iter().any(|a| matches!(a, Action::Save(_))), "{resumed:?}");
    replica.step(Event::Command { policy: web(), id: 10, command: Command::Abort, now: 4_000 });
    assert!(replica.policies()[&web()].active.is_none(), "the leader acts on commands");
}

#[test]
fn a_follower_holds_as_the_stored_state_says_and_decides_nothing() {
    let mut leader = started();
    leader.step(published("r2", &plan("r2", "green", "1", true), 1_000));
    let stored = leader.stored();

    let mut agent = State::follower();
    agent.step(Event::Leading(true));
    let r2 = plan("r2", "green", "1", true);
    assert!(holds(&agent.step(published("r2", &r2, 2_000))).is_empty(), "nothing before the state is read");
    let actions = agent.step(Event::Loaded(Some(stored.clone())));
    assert!(actions.iter().any(|a| matches!(a, Action::Render(r) if r == "r1")), "{actions:?}");
    // Its Git has not got r1 yet: it waits, and asks again at the next read.
    agent.step(Event::Rendered { revision: "r1".into(), plan: Err("not fetched yet".into()) });
    assert!(agent.policies()[&web()].active.is_some(), "a follower never ends a rollout");
    let again = agent.step(Event::Loaded(Some(stored)));
    assert!(again.iter().any(|a| matches!(a, Action::Render(r) if r == "r1")), "{again:?}");
    let assigned = agent.step(Event::Rendered { revision: "r1".into(), plan: Ok(plan("r1", "blue", "1", true)) });
    assert_eq!(holds(&assigned)[0]["member3"], ["r1"]);
    assert!(!assigned.iter().any(|a| matches!(a, Action::Save(_))), "a follower saves nothing");
    // Observations, commands and time are the leader's to act on.
    agent.step(Event::Command { policy: web(), id: 9, command: Command::Abort, now: 3_000 });
    assert!(agent.policies()[&web()].active.is_some());
}
