//! The soak's checks fail when they should: synthetic audit events and a small
//! repository, each breaking one invariant.

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::invariants::{Audits, autoscaler_commits, late_writes, unasked_deletions};
use super::model::{Item, MEMBERS, Model};
use super::world::HOST;
use crate::controller::git;

fn t(seconds: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000) + Duration::from_millis(seconds * 100)
}

fn stamp(at: SystemTime) -> String {
    k8s_openapi::jiff::Timestamp::try_from(at).unwrap().to_string()
}

fn event(verb: &str, resource: &str, name: &str, at: SystemTime, pid: u32, code: u64) -> Value {
    json!({
        "verb": verb, "requestReceivedTimestamp": stamp(at), "responseStatus": {"code": code},
        "userAgent": format!("flotilla/0.1.0 (flotilla-{pid})"),
        "objectRef": {"resource": resource, "namespace": "chaos", "name": name},
    })
}

fn audits(member1: Vec<Value>, host: Vec<Value>) -> Audits {
    let mut audits: Audits = MEMBERS.iter().map(|m| (m.to_string(), vec![])).collect();
    audits.insert("member1".into(), member1);
    audits.insert(HOST.into(), host);
    audits
}

fn with(on_member1: bool) -> Model {
    let mut model = Model::default();
    let members = if on_member1 { [0, 1].into() } else { [1].into() };
    model.items.insert("item-0".into(), Item { value: 0, members });
    model
}

#[test]
fn a_deletion_counts_only_after_a_revision_removed_the_object_there() {
    // Placed on member1 at 1, removed from it at 5, placed again at 8.
    let history = vec![(t(1), with(true)), (t(5), with(false)), (t(8), with(true))];
    let delete = |at| event("delete", "configmaps", "item-0", t(at), 7, 200);
    let (violations, checked) = unasked_deletions(&audits(vec![delete(6), delete(9)], vec![]), &history);
    assert_eq!((violations.len(), checked), (0, 2), "{violations:?}");
    let (violations, _) = unasked_deletions(&audits(vec![delete(3)], vec![]), &history);
    assert_eq!(violations.len(), 1, "deleted before any revision removed it");
    assert!(violations[0].contains("member1: configmaps chaos/item-0"), "{violations:?}");
    // Never placed anywhere and then deleted: a revision lacking it is not a removal.
    let (violations, _) = unasked_deletions(&audits(vec![delete(6)], vec![]), &history[1..]);
    assert_eq!(violations.len(), 1);
    // Kinds Git never removes; slices are the endpoints loop's, and the divided web
    // Deployment follows Git's count; failed deletions and other clients' do not count.
    let others = vec![
        event("delete", "services", "web", t(9), 7, 200),
        event("delete", "deployments", "web", t(9), 7, 200),
        event("delete", "endpointslices", "web-x", t(9), 7, 200),
        event("delete", "configmaps", "item-0", t(3), 7, 404),
        json!({"verb": "delete", "requestReceivedTimestamp": stamp(t(3)), "responseStatus": {"code": 200},
               "userAgent": "kubectl/v1.35", "objectRef": {"resource": "configmaps", "namespace": "chaos", "name": "item-0"}}),
    ];
    let (violations, checked) = unasked_deletions(&audits(others, vec![]), &history);
    assert_eq!((violations.len(), checked), (1, 3), "{violations:?}");
    assert!(violations[0].contains("services chaos/web"), "{violations:?}");
}

#[test]
fn a_write_after_the_renew_deadline_is_a_violation() {
    let renewals = vec![event("update", "leases", "flotilla-chaos", t(10), 7, 200)];
    let replicas = [(7, "replica-a".to_owned())];
    // 2.0 s after the renewal: inside 2.667 s.
    let fine = vec![event("patch", "configmaps", "item-0", t(30), 7, 200)];
    let (violations, latest, checked) = late_writes(&audits(fine, renewals.clone()), &replicas);
    assert_eq!((violations.len(), latest, checked), (0, Duration::from_secs(2), 1));
    // 3.5 s after: past the deadline and the in-flight allowance.
    let late = vec![event("patch", "configmaps", "item-0", t(45), 7, 200)];
    let (violations, _, _) = late_writes(&audits(late.clone(), renewals.clone()), &replicas);
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert!(violations[0].contains("by replica-a (pid 7), 3.5s after its last renewal"), "{violations:?}");
    // A failed renewal does not extend it; without any renewal every write is late.
    let failed = vec![renewals[0].clone(), event("update", "leases", "flotilla-chaos", t(40), 7, 409)];
    assert_eq!(late_writes(&audits(late.clone(), failed), &replicas).0.len(), 1);
    assert_eq!(late_writes(&audits(late.clone(), vec![]), &replicas).0.len(), 1);
    // Another process's writes are not this replica's.
    assert_eq!(late_writes(&audits(late, renewals), &[(8, "replica-b".to_owned())]).2, 0);
}

#[test]
fn an_autoscaler_commit_must_change_what_it_says_from_what_its_parent_held() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    git(repo, &["init", "-q", "-b", "main"]);
    let commit = |replicas: u32, author: &str, subject: &str| {
        std::fs::write(repo.join("web.yaml"), format!("spec:\n  replicas: {replicas}\n")).unwrap();
        git(repo, &["add", "-A"]);
        let who = [format!("user.name={author}"), "user.email=a@example.invalid".to_owned()];
        git(repo, &["-c", &who[0], "-c", &who[1], "commit", "-q", "--allow-empty", "-m", subject]);
    };
    commit(1, "test", "first");
    commit(4, "flotilla-autoscaler", "autoscale: apps/v1 Deployment chaos/web: replicas 1 → 4 (FederatedHPA)");
    assert_eq!(autoscaler_commits(repo), (vec![], 1));
    // The same decision committed twice: the second changes nothing.
    commit(4, "flotilla-autoscaler", "autoscale: apps/v1 Deployment chaos/web: replicas 1 → 4 (FederatedHPA)");
    let (violations, count) = autoscaler_commits(repo);
    assert_eq!((violations.len(), count), (1, 2), "{violations:?}");
    assert!(violations[0].contains("the count went Some(4) → Some(4)"), "{violations:?}");
}
