//! Who may write or delete a live object: the one decision apply and prune share.
//!
//! An object belongs to the flotilla instance named by its [`INSTANCE_ANNOTATION`] (with
//! the [`MANAGED_LABEL`]). Another instance's object is never taken over, whatever the
//! template's conflict resolution says, and never deleted: two installs that render the
//! same object report a conflict instead of fighting over it, and the second one's prune
//! cannot delete what the first one runs (a PersistentVolumeClaim deleted is data lost).

use serde_json::Value;

use crate::finish::INSTANCE_ANNOTATION;
use crate::render::{CONFLICT_ANNOTATION, MANAGED_LABEL};

/// Who a live object belongs to, as far as flotilla can tell from its metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// Not created by flotilla (no managed label).
    Unmanaged,
    /// Managed by flotilla, before the instance annotation existed.
    AnyInstance,
    /// Managed by the named instance.
    Instance(String),
}

impl Owner {
    /// Reads the managed label and instance annotation of a live object.
    pub fn of(live: &Value) -> Owner {
        let metadata = |field: &str, key: &str| {
            live.get("metadata").and_then(|m| m.get(field)).and_then(|m| m.get(key)).and_then(Value::as_str)
        };
        match (metadata("labels", MANAGED_LABEL), metadata("annotations", INSTANCE_ANNOTATION)) {
            (Some("true"), Some(instance)) => Owner::Instance(instance.to_owned()),
            (Some("true"), None) => Owner::AnyInstance,
            _ => Owner::Unmanaged,
        }
    }
}

/// Why an existing object is not applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Conflict {
    /// It exists and flotilla did not create it; the template does not ask to take over.
    #[error("exists and was not created by flotilla (conflictResolution is Abort)")]
    Unmanaged,
    /// Another flotilla instance manages it.
    #[error("managed by flotilla instance {0:?}; not taken over (an object has one owner)")]
    OtherInstance(String),
}

/// Whether `instance` may apply `desired` over the `live` object. Objects of older
/// versions (no instance annotation) are this instance's to re-stamp.
pub fn may_apply(desired: &Value, live: &Value, instance: &str) -> Result<(), Conflict> {
    match Owner::of(live) {
        Owner::Instance(other) if other != instance => Err(Conflict::OtherInstance(other)),
        Owner::Instance(_) | Owner::AnyInstance => Ok(()),
        Owner::Unmanaged => {
            let resolution = desired.pointer("/metadata/annotations").and_then(|a| a.get(CONFLICT_ANNOTATION));
            if resolution == Some(&Value::from("overwrite")) { Ok(()) } else { Err(Conflict::Unmanaged) }
        }
    }
}

/// Whether `instance` may delete the `live` object when it leaves Git: only its own.
pub fn may_prune(live: &Value, instance: &str) -> bool {
    Owner::of(live) == Owner::Instance(instance.to_owned())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn live(labels: Value, annotations: Value) -> Value {
        json!({"metadata": {"name": "x", "labels": labels, "annotations": annotations}})
    }

    fn desired(resolution: &str) -> Value {
        json!({"metadata": {"annotations": {CONFLICT_ANNOTATION: resolution}}})
    }

    #[test]
    fn another_instances_object_is_never_taken_over_or_pruned() {
        let theirs = live(json!({MANAGED_LABEL: "true"}), json!({INSTANCE_ANNOTATION: "team-a"}));
        for resolution in ["abort", "overwrite"] {
            assert_eq!(
                may_apply(&desired(resolution), &theirs, "team-b"),
                Err(Conflict::OtherInstance("team-a".into()))
            );
        }
        assert!(!may_prune(&theirs, "team-b"));
        assert_eq!(may_apply(&desired("abort"), &theirs, "team-a"), Ok(()));
        assert!(may_prune(&theirs, "team-a"));
    }

    #[test]
    fn unmanaged_objects_are_taken_over_only_on_overwrite_and_never_pruned() {
        let foreign = live(json!({"app": "x"}), json!({}));
        assert_eq!(may_apply(&desired("abort"), &foreign, "i"), Err(Conflict::Unmanaged));
        assert_eq!(may_apply(&desired("overwrite"), &foreign, "i"), Ok(()));
        assert!(!may_prune(&foreign, "i"));
        assert!(!may_prune(&json!({}), "i"));
    }

    #[test]
    fn objects_from_before_the_instance_annotation_are_re_stamped_but_not_pruned() {
        let legacy = live(json!({MANAGED_LABEL: "true"}), json!({}));
        assert_eq!(may_apply(&desired("abort"), &legacy, "i"), Ok(()));
        assert!(!may_prune(&legacy, "i"));
    }
}
