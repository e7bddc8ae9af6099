//! The endpoints decision over random histories: leadership, renders, listings and
//! changes of provider slices, probes, write results and time.

use std::collections::BTreeSet;

use flotilla_core::multicluster::{Port, Via};
use proptest::prelude::*;
use serde_json::json;

use super::*;

fn settings() -> Settings {
    Settings { instance: "flotilla".into(), unreachable_after: Duration::from_secs(6), retry: Duration::from_secs(2) }
}

/// nginx provided by member1 and member2, consumed by member3 (or not exported).
fn services(exported: bool) -> Vec<Exported> {
    let ports = Some(vec![Port { name: String::new(), protocol: "TCP".into(), port: 80 }]);
    let service = Exported {
        namespace: "default".into(),
        name: "nginx".into(),
        via: Via::ServiceImport,
        providers: [("member1".into(), ports.clone()), ("member2".into(), ports)].into(),
        consumers: ["member3".to_owned()].into(),
    };
    if exported { vec![service] } else { Vec::new() }
}

/// A provider's slice `name` with one address.
fn slice(name: &str, address: u8) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "default", "resourceVersion": "5",
                     "labels": {"kubernetes.io/service-name": "nginx",
                                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}},
        "addressType": "IPv4", "endpoints": [{"addresses": [format!("10.0.0.{address}")], "conditions": {"ready": true}}],
        "ports": [{"port": 80, "protocol": "TCP"}],
    })
}

#[derive(Debug, Clone)]
enum Random {
    Leading(bool),
    Rendered(bool),
    /// A member (1..=3) lists its slices: a slice of its own with this address.
    Listed(u8, u8),
    /// A provider's slice changes address.
    Applied(u8, u8),
    Probed(u8, bool),
    /// The oldest write in flight finishes, or fails.
    Wrote(bool),
    Wait(u64),
}

fn history() -> impl Strategy<Value = Vec<Random>> {
    let member = 1u8..=3;
    let step = prop_oneof![
        1 => proptest::bool::weighted(0.8).prop_map(Random::Leading),
        1 => proptest::bool::weighted(0.8).prop_map(Random::Rendered),
        3 => (member.clone(), 1u8..=4).prop_map(|(m, a)| Random::Listed(m, a)),
        3 => (1u8..=2, 1u8..=4).prop_map(|(m, a)| Random::Applied(m, a)),
        3 => (member, proptest::bool::weighted(0.8)).prop_map(|(m, ok)| Random::Probed(m, ok)),
        4 => proptest::bool::weighted(0.8).prop_map(Random::Wrote),
        3 => (0u64..5_000).prop_map(Random::Wait),
    ];
    proptest::collection::vec(step, 1..150)
}

proptest! {
    /// Nothing is written without the lease; nothing is written to a member the last
    /// render does not name; and a slice never has two writes in flight at once.
    #[test]
    fn endpoints_write_only_as_leader_to_rendered_members_one_write_per_slice(history in history()) {
        let mut state = State::new(settings());
        let t0 = Instant::now();
        let (mut now, mut leading) = (t0, false);
        let mut clusters: BTreeSet<String> = BTreeSet::new();
        let mut in_flight: std::collections::VecDeque<(String, Key)> = Default::default();
        for step_ in history {
            let member = |m: u8| format!("member{m}");
            let event = match step_ {
                Random::Leading(lead) => {
                    leading = lead;
                    in_flight.clear();
                    Event::Leading(lead, now)
                }
                Random::Rendered(exported) => {
                    clusters = (1..=3).map(member).collect();
                    Event::Rendered { services: services(exported), clusters: clusters.clone(), now }
                }
                Random::Listed(m, a) => {
                    let objects = if m < 3 { vec![slice(&format!("nginx-{m}"), a)] } else { Vec::new() };
                    Event::Listed { cluster: member(m), objects, now }
                }
                Random::Applied(m, a) => Event::Applied { cluster: member(m), object: slice(&format!("nginx-{m}"), a), now },
                Random::Probed(m, ok) => Event::Probed { cluster: member(m), ok, now },
                Random::Wrote(ok) => match in_flight.pop_front() {
                    Some((cluster, key)) => {
                        let result = if ok { Ok(Some(9)) } else { Err("conflict".into()) };
                        Event::Wrote { cluster, key, result, now }
                    }
                    None => Event::Tick(now),
                },
                Random::Wait(ms) => {
                    now += Duration::from_millis(ms);
                    Event::Tick(now)
                }
            };
            for action in state.step(event) {
                let (cluster, key) = match action {
                    Action::Put { cluster, object } => (cluster, key_of(&object).expect("a keyed slice")),
                    Action::Delete { cluster, key } => (cluster, key),
                    _ => continue,
                };
                prop_assert!(leading, "a write without the lease: {cluster} {key:?}");
                prop_assert!(clusters.contains(&cluster), "a write to {cluster}, which no render names");
                let twice = in_flight.iter().any(|(c, k)| *c == cluster && *k == key);
                prop_assert!(!twice, "two writes in flight for {key:?} in {cluster}");
                in_flight.push_back((cluster, key));
            }
        }
    }
}
