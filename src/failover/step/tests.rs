use super::*;
use flotilla_core::model::{Limits, RepoFiles};

const CLUSTERS: &str = "apiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {name: member1}\nspec: {syncMode: Push}\n---\napiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {name: member2}\nspec: {syncMode: Push}\n---\napiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {name: member3}\nspec: {syncMode: Pull}\n";

const TAINT_POLICY: &str = "apiVersion: policy.karmada.io/v1alpha1\nkind: ClusterTaintPolicy\nmetadata: {name: evict}\nspec:\n  addOnConditions: [{conditionType: Ready, operator: NotIn, statusValues: ['True']}]\n  removeOnConditions: [{conditionType: Ready, operator: In, statusValues: ['True']}]\n  taints: [{key: cluster.karmada.io/not-ready, effect: NoExecute}]\n";

/// `name`, 9 replicas divided 1:1:1, tolerating the NoExecute taint for 10 s.
fn workload(name: &str, replicas: i64, failover: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}, namespace: shop}}\nspec:\n  replicas: {replicas}\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec: {{containers: [{{name: c, image: nginx}}]}}\n---\napiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: {name}, namespace: shop}}\nspec:\n  resourceSelectors: [{{apiVersion: apps/v1, kind: Deployment, name: {name}}}]\n  placement:\n    clusterAffinity: {{clusterNames: [member1, member2, member3]}}\n    clusterTolerations: [{{key: cluster.karmada.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 10}}]\n    replicaScheduling: {{replicaSchedulingType: Divided, replicaDivisionPreference: Weighted}}\n{failover}"
    )
}

const GRACEFUL: &str = "  failover: {cluster: {purgeMode: Gracefully}}\n";

fn plan(docs: &[&str]) -> Arc<Plan> {
    let mut files = RepoFiles { revision: "r1".into(), ..Default::default() };
    files.files.insert("fleet.yaml".into(), docs.join("---\n").into_bytes());
    Arc::new(flotilla_core::plan(&files, &ClusterState::default(), &Limits::default()).unwrap())
}

fn fleet() -> Arc<Plan> {
    plan(&[CLUSTERS, TAINT_POLICY, &workload("web", 9, GRACEFUL), &workload("batch", 9, "")])
}

fn settings() -> Settings {
    Settings {
        failure_threshold: Duration::from_secs(3),
        success_threshold: Duration::from_secs(3),
        monitor_grace: Duration::from_secs(8),
        startup_grace: Duration::from_secs(10),
        eviction: true,
        eviction_rate: 10.0,
        graceful_timeout: Duration::from_secs(600),
        unhealthy_threshold: 0.55,
    }
}

const S: Millis = 1000;

/// A leading loop with memory loaded and `plan` rendered, every member healthy at t=0.
fn leading(settings: Settings, plan: Arc<Plan>) -> State {
    let mut state = State::new(settings);
    assert_eq!(state.step(Event::Leading(true, 0)), vec![Action::Load]);
    state.step(Event::Loaded(None));
    state.step(Event::Rendered(plan));
    for cluster in ["member1", "member2"] {
        state.step(Event::Probed { cluster: cluster.into(), ok: true, now: 0 });
    }
    state.step(Event::Leases(BTreeMap::from([("member3".into(), 0)])));
    state.step(Event::Tick(0));
    state
}

/// Every second from `from` to `to`: member2's probe fails, the others answer.
fn member2_down(state: &mut State, from: Millis, to: Millis) -> Vec<Action> {
    let mut actions = Vec::new();
    for t in (from..=to).step_by(S as usize) {
        state.step(Event::Probed { cluster: "member1".into(), ok: true, now: t });
        state.step(Event::Probed { cluster: "member2".into(), ok: false, now: t });
        state.step(Event::Leases(BTreeMap::from([("member3".into(), t)])));
        actions.extend(state.step(Event::Tick(t)));
    }
    actions
}

fn moved(actions: &[Action]) -> Vec<(String, String)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Moved(m) => Some((m.object.rsplit('/').next().unwrap().to_owned(), m.from.clone())),
            _ => None,
        })
        .collect()
}

fn key(name: &str) -> String {
    format!("apps/v1/Deployment/shop/{name}")
}

#[test]
fn a_failing_member_is_tainted_then_the_opted_in_workload_leaves_after_its_toleration() {
    let mut state = leading(settings(), fleet());
    let before = member2_down(&mut state, S, 3 * S);
    assert!(before.iter().all(|a| !matches!(a, Action::Changed { .. })), "not before the failure threshold");
    let failing = member2_down(&mut state, 4 * S, 4 * S);
    assert!(failing.contains(&Action::Changed {
        cluster: "member2".into(),
        ready: Readiness::False,
        reason: "probes have failed for 3s".into()
    }));
    let taints: Vec<&str> = state.memory().clusters["member2"].taints.iter().map(|t| t.taint.effect.as_str()).collect();
    assert_eq!(taints, ["NoExecute", "NoSchedule"]);
    let published = failing.iter().find_map(|a| match a {
        Action::Publish(overlay) => Some(overlay.clone()),
        _ => None,
    });
    assert_eq!(published.unwrap().taints["member2"].len(), 2, "renders learn of the taints at once");
    assert!(moved(&member2_down(&mut state, 5 * S, 13 * S)).is_empty(), "tolerated for 10 s");
    let evicted = member2_down(&mut state, 14 * S, 14 * S);
    assert_eq!(moved(&evicted), [("web".to_owned(), "member2".to_owned())], "batch has no opt-in");
    let task = &state.memory().evictions[&key("web")]["member2"];
    assert!(task.kept && task.purge == PurgeMode::Gracefully && task.replicas == 3);
    assert!(evicted.iter().any(|a| matches!(a, Action::Save(_))), "the eviction is stored before anything moves");
    assert_eq!(state.overlay().evictions[&key("web")]["member2"], Evicted { keep: Some(3) });
}

#[test]
fn a_graceful_copy_goes_once_the_replicas_elsewhere_are_healthy() {
    let mut state = leading(settings(), fleet());
    member2_down(&mut state, S, 14 * S);
    let observe = state.watch_list();
    let Action::Observe(watched) = &observe[1] else { panic!("{observe:?}") };
    assert!(watched.iter().any(|(k, c)| k.name == "web" && c == "member1"), "{watched:?}");
    // The next render moves the replicas; member1 is healthy, member3 not yet.
    let mut moved_plan = Arc::try_unwrap(fleet()).ok().unwrap();
    let placement = moved_plan.placements.get_mut(&key("web")).unwrap();
    placement.clusters = BTreeMap::from([("member1".into(), 5), ("member2".into(), 3), ("member3".into(), 4)]);
    state.step(Event::Rendered(Arc::new(moved_plan)));
    let health = |state: &mut State, cluster: &str, healthy: bool, now: Millis| {
        state.step(Event::Workload { key: key("web"), cluster: cluster.into(), healthy, generation: 1, now });
    };
    health(&mut state, "member1", true, 15 * S);
    health(&mut state, "member3", false, 15 * S);
    member2_down(&mut state, 15 * S, 15 * S);
    assert!(state.memory().evictions[&key("web")]["member2"].kept);
    health(&mut state, "member3", true, 16 * S);
    member2_down(&mut state, 16 * S, 16 * S);
    assert!(!state.memory().evictions[&key("web")]["member2"].kept, "the old copy may go now");
    assert_eq!(state.overlay().evictions[&key("web")]["member2"], Evicted { keep: None });
    let history = &state.memory().history;
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].after.as_ref().unwrap()["member1"], 5, "the move learns where the replicas went");
}

#[test]
fn nothing_moves_without_the_switch_and_nothing_is_decided_in_the_startup_grace() {
    let mut state = leading(Settings { eviction: false, ..settings() }, fleet());
    let actions = member2_down(&mut state, S, 60 * S);
    assert!(moved(&actions).is_empty());
    assert_eq!(state.memory().clusters["member2"].ready, Readiness::False, "it is still tainted");

    let mut fresh = State::new(settings());
    fresh.step(Event::Leading(true, 0));
    fresh.step(Event::Loaded(None));
    fresh.step(Event::Rendered(fleet()));
    fresh.step(Event::Tick(9 * S));
    assert!(fresh.memory().clusters.is_empty(), "nothing heard yet, still in the startup grace");
    fresh.step(Event::Tick(11 * S));
    assert!(fresh.memory().clusters.values().all(|h| h.ready == Readiness::Unknown));
    assert!(
        fresh.memory().clusters["member3"].taints.iter().any(|t| t.taint.key == flotilla_core::failover::UNREACHABLE)
    );
}

#[test]
fn a_pull_member_whose_lease_goes_stale_is_unknown_and_handled_alike() {
    let mut state = leading(settings(), fleet());
    let mut actions = Vec::new();
    for t in (S..=30 * S).step_by(S as usize) {
        for cluster in ["member1", "member2"] {
            state.step(Event::Probed { cluster: cluster.into(), ok: true, now: t });
        }
        actions.extend(state.step(Event::Tick(t)));
    }
    assert!(
        actions
            .iter()
            .any(|a| matches!(a, Action::Changed { cluster, ready: Readiness::Unknown, .. } if cluster == "member3"))
    );
    assert_eq!(moved(&actions), [("web".to_owned(), "member3".to_owned())]);
}

#[test]
fn evictions_keep_to_the_rate_and_stop_when_most_members_look_down() {
    let three = plan(&[
        CLUSTERS,
        TAINT_POLICY,
        &workload("a", 9, GRACEFUL),
        &workload("b", 9, GRACEFUL),
        &workload("c", 9, GRACEFUL),
    ]);
    let mut state = leading(Settings { eviction_rate: 0.5, ..settings() }, three.clone());
    let actions = member2_down(&mut state, S, 20 * S);
    let at: Vec<Millis> =
        actions.iter().filter_map(|a| if let Action::Moved(m) = a { Some(m.at) } else { None }).collect();
    assert_eq!(at, [14 * S, 16 * S, 18 * S], "one every two seconds");

    let mut cut_off = leading(settings(), three);
    let mut actions = Vec::new();
    for t in (S..=30 * S).step_by(S as usize) {
        for cluster in ["member1", "member2"] {
            cut_off.step(Event::Probed { cluster: cluster.into(), ok: false, now: t });
        }
        actions.extend(cut_off.step(Event::Tick(t)));
    }
    assert!(moved(&actions).is_empty(), "every member failing at once is this controller's problem");
}

#[test]
fn a_recovered_member_loses_its_taints_but_gets_its_share_back_only_on_reschedule() {
    let mut state = leading(settings(), fleet());
    member2_down(&mut state, S, 14 * S);
    for t in (15 * S..=20 * S).step_by(S as usize) {
        for cluster in ["member1", "member2"] {
            state.step(Event::Probed { cluster: cluster.into(), ok: true, now: t });
        }
        state.step(Event::Leases(BTreeMap::from([("member3".into(), t)])));
        state.step(Event::Tick(t));
    }
    assert_eq!(state.memory().clusters["member2"].ready, Readiness::True);
    assert!(state.memory().clusters["member2"].taints.is_empty());
    assert!(state.overlay().evictions.contains_key(&key("web")), "the replicas stay where they went");
    // The same render again changes nothing; a new replica count in Git reschedules.
    state.step(Event::Rendered(fleet()));
    assert!(state.overlay().evictions.contains_key(&key("web")));
    state.step(Event::Rendered(plan(&[
        CLUSTERS,
        TAINT_POLICY,
        &workload("web", 12, GRACEFUL),
        &workload("batch", 9, ""),
    ])));
    assert!(state.overlay().evictions.is_empty());
}

#[test]
fn a_new_leader_continues_from_the_stored_memory() {
    let mut state = leading(settings(), fleet());
    member2_down(&mut state, S, 14 * S);
    let stored = state.memory().clone();
    let mut next = State::new(settings());
    next.step(Event::Leading(true, 100 * S));
    let actions = next.step(Event::Loaded(Some(stored)));
    let overlay = actions.iter().find_map(|a| if let Action::Publish(o) = a { Some(o.clone()) } else { None });
    assert_eq!(overlay.unwrap().evictions[&key("web")]["member2"], Evicted { keep: Some(3) });
    next.step(Event::Rendered(fleet()));
    assert_eq!(next.memory().history.len(), 1);
}

/// `web` in member1 observed (healthy or not, at `generation`) at `t`, every member
/// Ready, then a tick.
fn observed(state: &mut State, healthy: bool, generation: i64, t: Millis) -> Vec<Action> {
    state.step(Event::Workload { key: key("web"), cluster: "member1".into(), healthy, generation, now: t });
    for cluster in ["member1", "member2"] {
        state.step(Event::Probed { cluster: cluster.into(), ok: true, now: t });
    }
    state.step(Event::Leases(BTreeMap::from([("member3".into(), t)])));
    state.step(Event::Tick(t))
}

const APP_FAILOVER: &str =
    "  failover:\n    application: {decisionConditions: {tolerationSeconds: 5}, purgeMode: Directly}\n";

#[test]
fn an_unhealthy_application_moves_after_its_toleration_from_a_ready_member() {
    let mut state = leading(settings(), plan(&[CLUSTERS, &workload("web", 9, APP_FAILOVER)]));
    assert!(moved(&observed(&mut state, true, 1, S)).is_empty());
    for t in 2..=6 {
        assert!(moved(&observed(&mut state, false, 1, t * S)).is_empty());
    }
    assert_eq!(moved(&observed(&mut state, false, 1, 7 * S)), [("web".to_owned(), "member1".to_owned())]);
    assert_eq!(state.overlay().evictions[&key("web")]["member1"], Evicted { keep: None }, "Directly: gone at once");
}

/// A workload that never was healthy in a member (still starting, or pods that cannot
/// start there) is not moved, however long: failover moves what broke, not what never
/// worked (docs/failover.md).
#[test]
fn a_workload_never_healthy_in_a_member_is_not_moved_from_it() {
    let mut state = leading(settings(), plan(&[CLUSTERS, &workload("web", 9, APP_FAILOVER)]));
    for t in 1..=120 {
        assert!(moved(&observed(&mut state, false, 1, t * S)).is_empty(), "at {t}s");
    }
}

/// A change that never becomes healthy (a bad image: a new generation) is the rollout's
/// business; failover does not move it, so one bad commit cannot cascade evictions. The
/// next generation that turns healthy and then breaks is moved again.
#[test]
fn a_new_generation_that_never_turns_healthy_is_not_moved_but_one_that_breaks_is() {
    let mut state = leading(settings(), plan(&[CLUSTERS, &workload("web", 9, APP_FAILOVER)]));
    assert!(moved(&observed(&mut state, true, 1, S)).is_empty());
    for t in 2..=60 {
        assert!(moved(&observed(&mut state, false, 2, t * S)).is_empty(), "at {t}s");
    }
    assert!(moved(&observed(&mut state, true, 3, 61 * S)).is_empty());
    for t in 62..=66 {
        assert!(moved(&observed(&mut state, false, 3, t * S)).is_empty());
    }
    assert_eq!(moved(&observed(&mut state, false, 3, 67 * S)), [("web".to_owned(), "member1".to_owned())]);
}

/// One step of a random history of the failover loop.
#[derive(Debug, Clone)]
enum Random {
    /// member1 or member2 answers its probe, or not.
    Probe(bool, bool),
    /// member3's agent renews its Lease.
    Renew,
    /// A workload (web or batch) in a member (1..=3) is observed, healthy or not, at a
    /// generation (1..=3).
    Workload(bool, usize, bool, i64),
    /// The lease is won or lost.
    Leading(bool),
    /// Time passes (ms), then a tick.
    Wait(i64),
}

fn random_history() -> impl Strategy<Value = Vec<Random>> {
    let step = prop_oneof![
        4 => (any::<bool>(), proptest::bool::weighted(0.7)).prop_map(|(m, ok)| Random::Probe(m, ok)),
        2 => Just(Random::Renew),
        4 => (any::<bool>(), 1usize..=3, proptest::bool::weighted(0.6), 1i64..=3)
            .prop_map(|(web, m, healthy, generation)| Random::Workload(web, m, healthy, generation)),
        1 => proptest::bool::weighted(0.85).prop_map(Random::Leading),
        6 => (0i64..4_000).prop_map(Random::Wait),
    ];
    proptest::collection::vec(step, 1..200)
}

use proptest::prelude::*;

proptest! {
    /// Over random histories of probes, Lease renewals, workload health, lease changes
    /// and time: nothing is moved or stored without the lease; evictions keep to the
    /// rate; none while most members are not Ready; and application failover moves only
    /// a workload that was healthy in that member at the generation it runs, then not.
    #[test]
    fn failover_keeps_its_invariants_over_random_histories(history in random_history()) {
        let app = "  failover:\n    application: {decisionConditions: {tolerationSeconds: 2}, purgeMode: Directly}\n";
        let mut state = leading(settings(), plan(&[CLUSTERS, TAINT_POLICY, &workload("web", 9, GRACEFUL), &workload("batch", 9, app)]));
        let (mut now, mut leading, mut moves) = (0, true, 0.0f64);
        let (mut first_move_at, rate) = (None::<Millis>, settings().eviction_rate);
        // (workload, member) → (generation it was last healthy at, failing: was healthy
        // at the generation it runs, and is not now).
        let mut model: BTreeMap<(String, String), (Option<i64>, bool)> = BTreeMap::new();
        for step in history {
            let event = match step {
                Random::Probe(first, ok) => {
                    let cluster = if first { "member1" } else { "member2" };
                    Event::Probed { cluster: cluster.into(), ok, now }
                }
                Random::Renew => Event::Leases(BTreeMap::from([("member3".into(), now)])),
                Random::Workload(web, m, healthy, generation) => {
                    let (name, cluster) = (if web { "web" } else { "batch" }, format!("member{m}"));
                    let seen = model.entry((key(name), cluster.clone())).or_default();
                    if healthy {
                        *seen = (Some(generation), false);
                    } else {
                        seen.1 = seen.0 == Some(generation);
                    }
                    Event::Workload { key: key(name), cluster, healthy, generation, now }
                }
                Random::Leading(lead) => {
                    leading = lead;
                    Event::Leading(lead, now)
                }
                Random::Wait(ms) => {
                    now += ms;
                    Event::Tick(now)
                }
            };
            let reloading = matches!(event, Event::Leading(true, _));
            for action in state.step(event) {
                match action {
                    Action::Moved(m) => {
                        prop_assert!(leading, "a move without the lease: {m:?}");
                        let not_ready = state.memory().clusters.values().filter(|h| h.ready != Readiness::True).count();
                        prop_assert!(not_ready * 100 <= 55 * 3, "a move while {not_ready} of 3 members are not Ready");
                        if m.reason.starts_with("unhealthy for") {
                            let failing = model.get(&(m.object.clone(), m.from.clone())).is_some_and(|s| s.1);
                            prop_assert!(failing, "{} moved from {} though it never broke there", m.object, m.from);
                        }
                        moves += 1.0;
                        let since = *first_move_at.get_or_insert(now);
                        let allowed = settings().eviction_rate.max(1.0) + rate * (now - since) as f64 / 1000.0;
                        prop_assert!(moves <= allowed + 1e-9, "{moves} moves in {} ms", now - since);
                    }
                    Action::Save(_) | Action::Publish(_) => prop_assert!(leading, "stored or published without the lease"),
                    Action::Load => prop_assert!(reloading, "loaded memory other than on winning the lease"),
                    _ => {}
                }
            }
        }
    }
}
