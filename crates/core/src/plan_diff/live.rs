//! A plan against the members as they are now (`flotilla diff --live`): per object, the
//! live object beside what a server-side apply dry run says it would become. Both come
//! from the API server, so defaults and normalisation (`0.5` → `500m`) are already the
//! server's; only the fields the manifest sets are compared, so fields other
//! controllers own never show. Drift shows: a live value someone changed differs from
//! the one applying would put back. Pure: the executor asks the members.

use serde_json::Value;

use super::{Changed, ClusterDiff, Entry, FieldChange, Side, fields_between, masked};
use crate::diff::APPLIED_DIGEST;
use crate::model::ObjectKey;

/// One object of one member, observed.
#[derive(Debug, Clone)]
pub struct Observed {
    /// Which object.
    pub key: ObjectKey,
    /// The manifest flotilla would apply.
    pub manifest: Value,
    /// The object in the member now, if it exists.
    pub live: Option<Value>,
    /// The dry run's result, or why the member refused it (a conflict, an invalid
    /// field, a kind it does not serve).
    pub applied: Result<Value, String>,
}

/// What applying would change in one member: objects created, objects whose
/// manifest-set fields change, objects pruned (`removed`: in the instance's inventory and
/// no longer rendered), and objects the member would refuse.
pub fn cluster(observed: &[Observed], removed: &[ObjectKey]) -> ClusterDiff {
    let mut diff = ClusterDiff::default();
    for o in observed {
        let applied = match &o.applied {
            Ok(applied) => applied,
            Err(why) => {
                diff.failed.push(super::Failed { object: Entry::from(&o.key), reason: why.clone() });
                continue;
            }
        };
        let Some(live) = &o.live else {
            let side = Side { manifest: o.manifest.clone(), overrides: Vec::new() };
            diff.added.push(Entry::placed(&o.key, &side));
            continue;
        };
        let (before, after) = (project(live, &o.manifest), project(applied, &o.manifest));
        let (before, after) = masked(&o.key, &before, &after);
        let mut fields = Vec::new();
        fields_between(&before, &after, &mut String::new(), &mut fields);
        fields.retain(|f: &FieldChange| f.path != format!("metadata.annotations.{APPLIED_DIGEST}"));
        if !fields.is_empty() {
            let object = Entry::from(&o.key);
            diff.changed.push(Changed { object, fields, overrides_added: Vec::new(), overrides_removed: Vec::new() });
        }
    }
    diff.removed = removed.iter().map(Entry::from).collect();
    diff
}

/// `value` limited to the fields `shape` sets (lists element by element).
fn project(value: &Value, shape: &Value) -> Value {
    match (value, shape) {
        (Value::Object(v), Value::Object(s)) => {
            Value::Object(s.keys().filter_map(|k| Some((k.clone(), project(v.get(k)?, &s[k])))).collect())
        }
        (Value::Array(v), Value::Array(s)) => Value::Array(
            v.iter().zip(s).map(|(item, shape)| project(item, shape)).chain(v.iter().skip(s.len()).cloned()).collect(),
        ),
        _ => value.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn key(kind: &str, name: &str) -> ObjectKey {
        let api_version = if kind == "Deployment" { "apps/v1" } else { "v1" };
        ObjectKey {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: Some("default".into()),
            name: name.into(),
        }
    }

    #[test]
    fn drift_changes_creations_refusals_and_prunes() {
        let manifest =
            json!({"metadata": {"name": "web", "annotations": {APPLIED_DIGEST: "new"}}, "spec": {"replicas": 2}});
        // Someone scaled it to 7; the dry run puts back 2. Status and server fields are
        // not the manifest's, and the digest is flotilla's bookkeeping.
        let live = json!({"metadata": {"name": "web", "uid": "u", "annotations": {APPLIED_DIGEST: "old"}},
                          "spec": {"replicas": 7, "strategy": {}}, "status": {"readyReplicas": 7}});
        let applied = json!({"metadata": {"name": "web", "uid": "u", "annotations": {APPLIED_DIGEST: "new"}},
                             "spec": {"replicas": 2, "strategy": {}}, "status": {"readyReplicas": 7}});
        let unchanged = Observed {
            key: key("ConfigMap", "same"),
            manifest: json!({"data": {"a": "1"}}),
            live: Some(json!({"data": {"a": "1"}, "metadata": {"x": 1}})),
            applied: Ok(json!({"data": {"a": "1"}, "metadata": {"x": 2}})),
        };
        let observed = [
            Observed {
                key: key("Deployment", "web"),
                manifest: manifest.clone(),
                live: Some(live),
                applied: Ok(applied),
            },
            Observed { key: key("Deployment", "new"), manifest, live: None, applied: Ok(json!({})) },
            Observed {
                key: key("ConfigMap", "taken"),
                manifest: json!({}),
                live: Some(json!({})),
                applied: Err("owned by instance other".into()),
            },
            unchanged,
        ];
        let d = cluster(&observed, &[key("ConfigMap", "old")]);
        assert_eq!(d.changed.len(), 1, "{d:?}");
        assert_eq!(
            d.changed[0].fields,
            [FieldChange { path: "spec.replicas".into(), from: Some(json!(7)), to: Some(json!(2)) }]
        );
        assert_eq!((d.added[0].name.as_str(), d.added[0].replicas), ("new", Some(2)));
        assert_eq!(
            (d.failed[0].object.name.as_str(), d.failed[0].reason.as_str()),
            ("taken", "owned by instance other")
        );
        assert_eq!(d.removed[0].name, "old");
    }

    #[test]
    fn secret_values_stay_masked() {
        let secret = |v: &str| json!({"data": {"password": v}});
        let observed = [Observed {
            key: key("Secret", "creds"),
            manifest: secret("bmV3"),
            live: Some(secret("b2xk")),
            applied: Ok(secret("bmV3")),
        }];
        let text = serde_json::to_string(&cluster(&observed, &[])).unwrap();
        assert!(!text.contains("bmV3") && !text.contains("b2xk") && text.contains("+++++++++"), "{text}");
    }
}
