use super::*;
use crate::status::{ConsumerStatus, ProviderStatus};
use flotilla_core::multicluster::{Port, Via};
use serde_json::json;

fn settings() -> Settings {
    Settings { instance: "flotilla".into(), unreachable_after: Duration::from_secs(6), retry: Duration::from_secs(2) }
}

/// nginx exported from member1 and member2, imported into member1.
fn seed() -> Vec<Exported> {
    let ports = Some(vec![Port { name: String::new(), protocol: "TCP".into(), port: 80 }]);
    vec![Exported {
        namespace: "default".into(),
        name: "nginx".into(),
        via: Via::ServiceImport,
        providers: [("member1".into(), ports.clone()), ("member2".into(), ports)].into(),
        consumers: ["member1".to_owned()].into(),
    }]
}

fn clusters() -> BTreeSet<String> {
    ["member1", "member2", "member3"].map(String::from).into()
}

fn slice(name: &str, addresses: &[&str]) -> Value {
    let endpoints: Vec<Value> =
        addresses.iter().map(|a| json!({"addresses": [a], "conditions": {"ready": true}})).collect();
    json!({
        "metadata": {"name": name, "namespace": "default", "resourceVersion": "5",
                     "labels": {"kubernetes.io/service-name": "nginx",
                                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}},
        "addressType": "IPv4", "endpoints": endpoints, "ports": [{"port": 80, "protocol": "TCP"}],
    })
}

fn puts(actions: &[Action]) -> Vec<(String, String)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Put { cluster, object } => {
                Some((cluster.clone(), object["metadata"]["name"].as_str().unwrap().to_owned()))
            }
            _ => None,
        })
        .collect()
}

fn deletes(actions: &[Action]) -> Vec<(String, String)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Delete { cluster, key } => Some((cluster.clone(), key.1.clone())),
            _ => None,
        })
        .collect()
}

/// A leader that has listed every member: member1 with one nginx slice, member2 with
/// another, member3 with nothing.
fn running(t0: Instant) -> (State, Vec<Action>) {
    let mut state = State::new(settings());
    let mut all = state.step(Event::Leading(true, t0));
    all.extend(state.step(Event::Rendered { services: seed(), clusters: clusters(), now: t0 }));
    assert!(all.contains(&Action::Watch(clusters())), "a new leader lists every member once: {all:?}");
    let listings =
        [("member1", vec![slice("nginx-a", &["10.101.0.4"])]), ("member2", vec![slice("nginx-b", &["10.102.0.7"])])];
    for (cluster, objects) in listings {
        all.extend(state.step(Event::Listed { cluster: cluster.into(), objects, now: t0 }));
    }
    all.extend(state.step(Event::Listed { cluster: "member3".into(), objects: vec![], now: t0 }));
    (state, all)
}

/// Confirms every pending write, as the API server would; returns what followed.
fn confirm(state: &mut State, actions: &[Action], now: Instant) -> Vec<Action> {
    let mut then = Vec::new();
    for action in actions {
        let (cluster, key, result) = match action {
            Action::Put { cluster, object } => (cluster, super::super::key_of(object), Ok(Some(10))),
            Action::Delete { cluster, key } => (cluster, key.clone(), Ok(None)),
            _ => continue,
        };
        then.extend(state.step(Event::Wrote { cluster: cluster.clone(), key, result, now }));
    }
    then
}

#[test]
fn every_provider_slice_reaches_the_consumer_once_and_nothing_is_rewritten() {
    let t0 = Instant::now();
    let (mut state, actions) = running(t0);
    assert_eq!(
        puts(&actions),
        [("member1".into(), "imported-member1-nginx-a".into()), ("member1".into(), "imported-member2-nginx-b".into())]
    );
    assert!(actions.contains(&Action::Watch(["member1", "member2"].map(String::from).into())), "{actions:?}");
    confirm(&mut state, &actions, t0);
    // The watch echoes the writes back; a tick and a re-render change nothing.
    let again = state.step(Event::Tick(t0 + Duration::from_secs(1)));
    let rerender = state.step(Event::Rendered { services: seed(), clusters: clusters(), now: t0 });
    assert_eq!(puts(&again).len() + puts(&rerender).len() + deletes(&again).len(), 0, "{again:?} {rerender:?}");
    let status = &state.status()["default/nginx"];
    assert_eq!(status.target, "derived-nginx");
    assert_eq!(status.providers["member2"], ProviderStatus { state: "ready".into(), endpoints: 1 });
    assert_eq!(status.consumers["member1"], ConsumerStatus { slices: 2, endpoints: 2, synced: true });
}

#[test]
fn a_pod_becoming_ready_is_one_write_to_each_consumer_slice() {
    let t0 = Instant::now();
    let (mut state, actions) = running(t0);
    confirm(&mut state, &actions, t0);
    let grown = slice("nginx-b", &["10.102.0.7", "10.102.0.8"]);
    let actions = state.step(Event::Applied { cluster: "member2".into(), object: grown.clone(), now: t0 });
    assert_eq!(puts(&actions), [("member1".into(), "imported-member2-nginx-b".into())]);
    // While that write is in flight, the same change again writes nothing more.
    let repeated = state.step(Event::Applied { cluster: "member2".into(), object: grown, now: t0 });
    assert!(puts(&repeated).is_empty(), "{repeated:?}");
}

#[test]
fn a_silent_provider_is_withdrawn_and_returns_once_listed_again() {
    let t0 = Instant::now();
    let (mut state, actions) = running(t0);
    confirm(&mut state, &actions, t0);
    let at = |s| t0 + Duration::from_secs(s);
    state.step(Event::Probed { cluster: "member1".into(), ok: true, now: at(5) });
    assert!(deletes(&state.step(Event::Tick(at(5)))).is_empty(), "within the bound nothing moves");
    let withdrawn = state.step(Event::Tick(at(7)));
    assert_eq!(deletes(&withdrawn), [("member1".into(), "imported-member2-nginx-b".into())]);
    confirm(&mut state, &withdrawn, at(7));
    assert_eq!(state.status()["default/nginx"].providers["member2"].state, "unreachable");
    // It answers: listed again first, and only what it lists comes back.
    let back = state.step(Event::Probed { cluster: "member2".into(), ok: true, now: at(20) });
    assert_eq!(back, [Action::Rewatch("member2".into())]);
    let listed = state.step(Event::Listed {
        cluster: "member2".into(),
        objects: vec![slice("nginx-c", &["10.102.0.9"])],
        now: at(21),
    });
    assert_eq!(puts(&listed), [("member1".into(), "imported-member2-nginx-c".into())]);
}

#[test]
fn a_failed_write_is_retried_after_the_retry_period() {
    let t0 = Instant::now();
    let (mut state, _) = running(t0);
    let key = ("default".to_owned(), "imported-member1-nginx-a".to_owned());
    state.step(Event::Wrote { cluster: "member1".into(), key: key.clone(), result: Err("timeout".into()), now: t0 });
    assert!(puts(&state.step(Event::Tick(t0 + Duration::from_secs(1)))).is_empty());
    let retried = state.step(Event::Tick(t0 + Duration::from_secs(3)));
    assert_eq!(puts(&retried), [("member1".into(), key.1)]);
}

#[test]
fn an_export_leaving_git_removes_its_slices_and_a_follower_writes_nothing() {
    let t0 = Instant::now();
    let (mut state, actions) = running(t0);
    confirm(&mut state, &actions, t0);
    let gone = state.step(Event::Rendered { services: vec![], clusters: clusters(), now: t0 });
    let mut removed = deletes(&gone);
    removed.sort();
    assert_eq!(
        removed,
        [("member1".into(), "imported-member1-nginx-a".into()), ("member1".into(), "imported-member2-nginx-b".into())]
    );
    assert_eq!(confirm(&mut state, &gone, t0).last(), Some(&Action::Watch(BTreeSet::new())), "nothing left to watch");
    assert!(state.step(Event::Tick(t0)).is_empty());
    // A follower takes no action at all.
    let mut follower = State::new(settings());
    follower.step(Event::Leading(false, t0));
    assert!(follower.step(Event::Rendered { services: seed(), clusters: clusters(), now: t0 }).is_empty());
}

#[test]
fn a_new_leader_starts_from_what_the_members_hold() {
    let t0 = Instant::now();
    let (mut state, actions) = running(t0);
    confirm(&mut state, &actions, t0);
    // Leadership moves away and back: member1 already holds both slices, one of them stale.
    state.step(Event::Leading(false, t0));
    state.step(Event::Leading(true, t0));
    let held = |name: &str, source: &Value, provider: &str| {
        let exported = &seed()[0];
        let mut o = multicluster::imported(exported, provider, &Slice::read(source).unwrap(), "flotilla");
        o["metadata"]["resourceVersion"] = json!("9");
        assert_eq!(o["metadata"]["name"], name);
        o
    };
    let fresh = held("imported-member1-nginx-a", &slice("nginx-a", &["10.101.0.4"]), "member1");
    let stale = held("imported-member2-nginx-b", &slice("nginx-b", &["10.102.0.1"]), "member2");
    let mut actions = Vec::new();
    for (cluster, objects) in [
        ("member1", vec![slice("nginx-a", &["10.101.0.4"]), fresh, stale]),
        ("member2", vec![slice("nginx-b", &["10.102.0.7"])]),
        ("member3", vec![]),
    ] {
        actions.extend(state.step(Event::Listed { cluster: cluster.into(), objects, now: t0 }));
    }
    assert_eq!(puts(&actions), [("member1".into(), "imported-member2-nginx-b".into())], "only the stale one");
}

#[test]
fn a_multi_cluster_service_skips_a_consumer_that_provides_too() {
    let t0 = Instant::now();
    let mut state = State::new(settings());
    state.step(Event::Leading(true, t0));
    let mut services = seed();
    services[0].via = Via::MultiClusterService;
    services[0].consumers = ["member1".to_owned(), "member3".to_owned()].into();
    let mut actions = state.step(Event::Rendered { services, clusters: clusters(), now: t0 });
    for (cluster, objects) in [
        ("member1", vec![slice("nginx-a", &["10.101.0.4"])]),
        ("member2", vec![slice("nginx-b", &["10.102.0.7"])]),
        ("member3", vec![]),
    ] {
        actions.extend(state.step(Event::Listed { cluster: cluster.into(), objects, now: t0 }));
    }
    let mut written = puts(&actions);
    written.sort();
    assert_eq!(
        written,
        [
            ("member1".into(), "member2-nginx-b".into()),
            ("member3".into(), "member1-nginx-a".into()),
            ("member3".into(), "member2-nginx-b".into())
        ]
    );
}

#[test]
fn conflicting_exports_leave_the_newer_ones_out_and_say_so_on_each_export() {
    let t0 = Instant::now();
    let (mut state, actions) = running(t0);
    confirm(&mut state, &actions, t0);
    let mut services = seed();
    let ports = Some(vec![Port { name: String::new(), protocol: "TCP".into(), port: 8080 }]);
    services[0].providers.insert("member2".into(), ports);
    let actions = state.step(Event::Rendered { services, clusters: clusters(), now: t0 });
    let asked: Vec<&Action> = actions.iter().filter(|a| matches!(a, Action::ReadCreated { .. })).collect();
    assert_eq!(asked.len(), 2, "{actions:?}");
    state.step(Event::Created {
        cluster: "member1".into(),
        key: ("default".into(), "nginx".into()),
        at: "2026-12-02T10:00:09Z".into(),
        now: t0,
    });
    let decided = state.step(Event::Created {
        cluster: "member2".into(),
        key: ("default".into(), "nginx".into()),
        at: "2026-12-02T10:00:01Z".into(),
        now: t0,
    });
    assert_eq!(deletes(&decided), [("member1".into(), "imported-member1-nginx-a".into())], "member1 lost");
    let conditions: Vec<&Action> = decided.iter().filter(|a| matches!(a, Action::Condition { .. })).collect();
    assert_eq!(conditions.len(), 2, "{decided:?}");
    assert!(
        matches!(conditions[0], Action::Condition { conflict: Some(m), .. } if m.starts_with("ports differ: member2 (the oldest export) wins"))
    );
    assert_eq!(state.status()["default/nginx"].providers["member1"].state, "conflict");
}
