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
        state.step(Event::Workload { key: key("web"), cluster: cluster.into(), healthy, now });
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

#[test]
fn an_unhealthy_application_moves_after_its_toleration_from_a_ready_member() {
    let app = "  failover:\n    application: {decisionConditions: {tolerationSeconds: 5}, purgeMode: Directly}\n";
    let mut state = leading(settings(), plan(&[CLUSTERS, &workload("web", 9, app)]));
    let sick = |state: &mut State, t: Millis| {
        state.step(Event::Workload { key: key("web"), cluster: "member1".into(), healthy: false, now: t });
        for cluster in ["member1", "member2"] {
            state.step(Event::Probed { cluster: cluster.into(), ok: true, now: t });
        }
        state.step(Event::Leases(BTreeMap::from([("member3".into(), t)])));
        state.step(Event::Tick(t))
    };
    for t in 1..=5 {
        assert!(moved(&sick(&mut state, t * S)).is_empty());
    }
    assert_eq!(moved(&sick(&mut state, 6 * S)), [("web".to_owned(), "member1".to_owned())]);
    assert_eq!(state.overlay().evictions[&key("web")]["member1"], Evicted { keep: None }, "Directly: gone at once");
}
