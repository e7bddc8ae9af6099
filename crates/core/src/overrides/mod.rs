//! Stage 4, overrides: which OverridePolicy rules apply to an object in a cluster, and
//! applying them (spec §4).
//!
//! Order: every matching ClusterOverridePolicy, then every matching OverridePolicy of
//! the object's namespace; within each group by match level ascending (no selectors
//! counts as `All`), then name ascending, so the most specific policy is applied last
//! and wins. Within a policy, rules in list order; within a rule, image → command →
//! args → labels → annotations → field → plaintext.

pub mod image;

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value, json};

use crate::matching::{MatchLevel, PolicyIndex, policy_level};
use crate::model::policy::{CommandArgsOverrider, FieldOverrider, MapOverrider, Operator, OverrideRule, Overriders};
use crate::model::{Cluster, Loaded, Named, OverrideSpec, Template};
use crate::schedule::filter::cluster_matches;

/// One rule of one policy: indices into [`Loaded::override_policies`] and its rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleRef {
    /// Policy index.
    pub policy: usize,
    /// Rule index within `spec.overrideRules`.
    pub rule: usize,
}

/// An RFC 6902 operation, as Karmada's overriders emit them.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct PatchOp {
    /// `add`, `remove` or `replace`.
    pub op: String,
    /// JSON pointer.
    pub path: String,
    /// Operand (absent for remove).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
}

impl PatchOp {
    /// A `replace` operation.
    pub fn replace(path: String, value: Value) -> Self {
        Self { op: "replace".into(), path, value: Some(value) }
    }

    fn new(operator: Operator, path: String, value: Option<Value>) -> Self {
        let op = match operator {
            Operator::Add => "add",
            Operator::Remove => "remove",
            Operator::Replace => "replace",
        };
        Self { op: op.into(), path, value: if operator == Operator::Remove { None } else { value } }
    }
}

/// Why overriding an object failed; rendering fails for that object and cluster.
#[derive(Debug, thiserror::Error)]
pub enum OverrideError {
    /// A JSON patch did not apply (e.g. `replace` on a missing path).
    #[error("{policy}: {overrider} could not be applied")]
    Patch {
        /// `OverridePolicy ns/name` or `ClusterOverridePolicy name`.
        policy: String,
        /// Which overrider.
        overrider: &'static str,
        /// The patch error.
        #[source]
        cause: json_patch::PatchError,
    },
    /// A field overrider's target is missing, not a string, or not JSON/YAML.
    #[error("{policy}: fieldOverrider {path}: {message}")]
    Field {
        /// The policy.
        policy: String,
        /// `fieldPath`.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A customization's `ReviseReplica` failed.
    #[error(transparent)]
    Interpret(#[from] crate::interpret::InterpretError),
}

fn describe(policy: &Named<OverrideSpec>) -> String {
    policy.describe("OverridePolicy", "ClusterOverridePolicy")
}

/// Indexes override policies by scope and selected kind (see [`PolicyIndex`]).
pub fn index(loaded: &Loaded) -> PolicyIndex<'_> {
    PolicyIndex::new(
        loaded
            .override_policies
            .iter()
            .enumerate()
            .map(|(i, p)| (i, p.namespace.as_deref(), p.spec.resource_selectors.as_slice())),
    )
}

/// The policies that apply to `template`, in application order: cluster-scoped first,
/// then its namespace's; each group by match level, then name.
pub fn ordered_policies(loaded: &Loaded, index: &PolicyIndex<'_>, template: &Template) -> Vec<usize> {
    let level = |p: &Named<OverrideSpec>| {
        if p.spec.resource_selectors.is_empty() {
            MatchLevel::All
        } else {
            policy_level(&p.spec.resource_selectors, &template.key, &template.labels)
        }
    };
    let group = |scope: Option<&str>| {
        let mut policies: Vec<(MatchLevel, &str, usize)> = index
            .candidates(scope, &template.key, &template.labels)
            .into_iter()
            .map(|i| (level(&loaded.override_policies[i]), loaded.override_policies[i].name.as_str(), i))
            .filter(|(level, _, _)| *level != MatchLevel::Mismatch)
            .collect();
        policies.sort();
        policies.into_iter().map(|(_, _, i)| i)
    };
    let namespaced = template.key.namespace.as_deref().map(|ns| group(Some(ns)));
    group(None).chain(namespaced.into_iter().flatten()).collect()
}

/// The rules of `policies` (from [`ordered_policies`]) that target `cluster`, in order.
pub fn rules_for(loaded: &Loaded, policies: &[usize], cluster: &Cluster) -> Vec<RuleRef> {
    policies
        .iter()
        .flat_map(|&policy| {
            let rules = &loaded.override_policies[policy].spec.override_rules;
            rules
                .iter()
                .enumerate()
                .filter(|(_, r)| r.target_cluster.as_ref().is_none_or(|t| cluster_matches(t, cluster)))
                .map(move |(rule, _)| RuleRef { policy, rule })
        })
        .collect()
}

/// The rules that apply to `template` in `cluster`, in application order.
pub fn matching(loaded: &Loaded, template: &Template, cluster: &Cluster) -> Vec<RuleRef> {
    rules_for(loaded, &ordered_policies(loaded, &index(loaded), template), cluster)
}

/// Applies the rules to `object` in order.
pub fn apply(object: &mut Value, loaded: &Loaded, rules: &[RuleRef]) -> Result<(), OverrideError> {
    for r in rules {
        let policy = &loaded.override_policies[r.policy];
        apply_rule(object, &policy.spec.override_rules[r.rule], &|| describe(policy))?;
    }
    Ok(())
}

/// Whether applying `rules` can fail. Plaintext patches and field overriders can (a path
/// may be missing, a field may not hold JSON or YAML), and so can an image overrider
/// given a predicate path, which is the user's. Labels and annotations edits cannot, nor
/// can image, command and args edits at the container paths read from the object
/// itself: they replace or add at paths that exist. Render tries only the rules that
/// can fail before it puts them in a plan.
pub fn may_fail(loaded: &Loaded, rules: &[RuleRef]) -> bool {
    rules.iter().any(|r| {
        let Overriders {
            plaintext,
            image_overrider,
            command_overrider: _,
            args_overrider: _,
            labels_overrider: _,
            annotations_overrider: _,
            field_overrider,
        } = &loaded.override_policies[r.policy].spec.override_rules[r.rule].overriders;
        !plaintext.is_empty() || !field_overrider.is_empty() || image_overrider.iter().any(|o| o.predicate.is_some())
    })
}

fn apply_rule(object: &mut Value, rule: &OverrideRule, policy: &dyn Fn() -> String) -> Result<(), OverrideError> {
    let Overriders {
        plaintext,
        image_overrider,
        command_overrider,
        args_overrider,
        labels_overrider,
        annotations_overrider,
        field_overrider,
    } = &rule.overriders;
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default().to_owned();
    let patch = |object: &mut Value, ops: Vec<PatchOp>, overrider: &'static str| {
        run_patch(object, ops).map_err(|cause| OverrideError::Patch { policy: policy(), overrider, cause })
    };
    for o in image_overrider {
        let ops = image::patches(object, &kind, o);
        patch(object, ops, "imageOverrider")?;
    }
    for (overriders, field, name) in
        [(command_overrider, "command", "commandOverrider"), (args_overrider, "args", "argsOverrider")]
    {
        for o in overriders {
            let ops = command_args_patches(object, &kind, o, field);
            patch(object, ops, name)?;
        }
    }
    for o in labels_overrider {
        edit_map(object, "labels", o);
    }
    for o in annotations_overrider {
        edit_map(object, "annotations", o);
    }
    for o in field_overrider {
        field(object, o).map_err(|message| OverrideError::Field {
            policy: policy(),
            path: o.field_path.clone(),
            message,
        })?;
    }
    let ops = plaintext.iter().map(|p| PatchOp::new(p.operator, p.path.clone(), p.value.clone())).collect();
    patch(object, ops, "plaintext")
}

fn run_patch(object: &mut Value, ops: Vec<PatchOp>) -> Result<(), json_patch::PatchError> {
    if ops.is_empty() {
        return Ok(());
    }
    let patch: json_patch::Patch = serde_json::from_value(json!(ops)).expect("PatchOp serialises to RFC 6902");
    json_patch::patch(object, &patch)
}

/// Command or args edits for every container with the overrider's name.
pub fn command_args_patches(object: &Value, kind: &str, o: &CommandArgsOverrider, field: &str) -> Vec<PatchOp> {
    let Some(base) = image::containers_path(kind) else {
        return Vec::new();
    };
    let containers = object.pointer(base).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    containers
        .iter()
        .enumerate()
        .filter(|(_, c)| c.get("name").and_then(Value::as_str) == Some(o.container_name.as_str()))
        .filter_map(|(i, c)| {
            let path = format!("{base}/{i}/{field}");
            let current: Option<Vec<String>> = c.get(field).and_then(|v| serde_json::from_value(v.clone()).ok());
            match (current, o.operator) {
                (None, Operator::Add) => Some(PatchOp::new(Operator::Add, path, Some(json!(o.value)))),
                (None, Operator::Remove) => Some(PatchOp::new(Operator::Add, path, Some(json!([])))),
                (Some(mut list), Operator::Add) => {
                    list.extend(o.value.iter().cloned());
                    Some(PatchOp::replace(path, json!(list)))
                }
                (Some(list), Operator::Remove) => {
                    let kept: Vec<String> = list.into_iter().filter(|v| !o.value.contains(v)).collect();
                    Some(PatchOp::replace(path, json!(kept)))
                }
                (_, Operator::Replace) => None,
            }
        })
        .collect()
}

/// `add` creates the map and sets keys; `replace` and `remove` only touch keys that exist.
pub fn edit_map(object: &mut Value, field: &str, o: &MapOverrider) {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if o.operator == Operator::Add {
        let map = metadata.entry(field).or_insert_with(|| json!({}));
        if map.is_null() {
            *map = json!({});
        }
        if let Some(map) = map.as_object_mut() {
            for (k, v) in &o.value {
                map.insert(k.clone(), Value::String(v.clone()));
            }
        }
        return;
    }
    let Some(map) = metadata.get_mut(field).and_then(Value::as_object_mut) else {
        return;
    };
    for (k, v) in &o.value {
        if map.contains_key(k) {
            match o.operator {
                Operator::Replace => {
                    map.insert(k.clone(), Value::String(v.clone()));
                }
                _ => {
                    map.remove(k);
                }
            }
        }
    }
}

/// Edits a string field that holds JSON or YAML: parse, patch, write back (compact JSON,
/// or YAML with sorted keys as sigs.k8s.io/yaml writes it).
pub fn field(object: &mut Value, o: &FieldOverrider) -> Result<(), String> {
    let target = object.pointer_mut(&o.field_path).ok_or("the field does not exist")?;
    let text = target.as_str().ok_or("the field is not a string")?;
    let yaml = !o.yaml.is_empty();
    let mut document: Value = if yaml {
        // The same budgets as a repository document: the text is the repository's too.
        crate::load::parse_embedded(text, &crate::model::Limits::default())
            .map_err(|_| "the field does not hold valid YAML within the parse limits".to_owned())?
    } else {
        serde_json::from_str(text).map_err(|_| "the field does not hold valid JSON".to_owned())?
    };
    let ops = if yaml { &o.yaml } else { &o.json };
    let ops = ops.iter().map(|p| PatchOp::new(p.operator, p.sub_path.clone(), p.value.clone())).collect();
    run_patch(&mut document, ops).map_err(|e| format!("sub-path patch failed: {e}"))?;
    let written = if yaml {
        crate::yaml::to_string(&document).map_err(|e| e.to_string())?
    } else {
        serde_json::to_string(&document).map_err(|e| e.to_string())?
    };
    *target = Value::String(written);
    Ok(())
}

/// The policies whose rules were applied, for reports (`[{policyName}]` sorted by name).
pub fn applied_policies(loaded: &Loaded, rules: &[RuleRef]) -> BTreeMap<String, String> {
    rules
        .iter()
        .map(|r| {
            let p = &loaded.override_policies[r.policy];
            (p.name.clone(), describe(p))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::policy::{FieldOverrider, Operator, OverrideRule, SubPatch};

    fn yaml_overrider() -> FieldOverrider {
        FieldOverrider {
            field_path: "/data/config".into(),
            json: vec![],
            yaml: vec![SubPatch {
                sub_path: "/level".into(),
                operator: Operator::Replace,
                value: Some(json!("debug")),
            }],
        }
    }

    /// The overriders [`may_fail`] calls safe never fail, whatever shape the object has.
    #[test]
    fn overriders_that_cannot_fail_do_not_on_any_object() {
        let rule: OverrideRule = serde_json::from_value(json!({"overriders": {
            "imageOverrider": [{"component": "Registry", "operator": "replace", "value": "mirror.example.com"},
                               {"component": "Tag", "operator": "remove"}],
            "commandOverrider": [{"containerName": "main", "operator": "add", "value": ["--x"]}],
            "argsOverrider": [{"containerName": "main", "operator": "remove", "value": ["-v"]},
                              {"containerName": "main", "operator": "replace", "value": ["-q"]}],
            "labelsOverrider": [{"operator": "add", "value": {"a": "b"}}, {"operator": "remove", "value": {"c": ""}}],
            "annotationsOverrider": [{"operator": "replace", "value": {"d": "e"}}],
        }}))
        .unwrap();
        let containers = |c: Value| json!({"spec": {"template": {"spec": {"containers": c}}}});
        let objects = [
            json!({}),
            json!({"metadata": null}),
            json!({"metadata": {"labels": null, "annotations": "text"}}),
            json!({"metadata": {"labels": {"c": "1"}, "annotations": {"d": "1"}}}),
            containers(json!(null)),
            containers(json!({"main": {}})),
            containers(json!([{"name": "main"}])),
            containers(json!([{"name": "main", "image": 3, "command": "sh", "args": null}])),
            containers(json!([{"name": "main", "image": "a/b:1", "command": ["sh"], "args": ["-v", "x"]}, 7])),
        ];
        for kind in ["Deployment", "Pod", "CronJob", "ConfigMap"] {
            for object in &objects {
                let mut object = object.clone();
                object["kind"] = json!(kind);
                let shape = object.to_string();
                apply_rule(&mut object, &rule, &|| "OverridePolicy o".into())
                    .unwrap_or_else(|e| panic!("{kind} {shape}: {e}"));
            }
        }
    }

    #[test]
    fn embedded_yaml_is_read_as_kubernetes_reads_it_and_within_the_parse_budgets() {
        let mut object = json!({"data": {"config": "level: info\nmode: 0644\nenabled: yes\n"}});
        field(&mut object, &yaml_overrider()).unwrap();
        let written = object["data"]["config"].as_str().unwrap();
        assert!(written.contains("level: debug") && written.contains("mode: 420"), "YAML 1.1 scalars: {written}");
        let bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\nlevel: info\n";
        let mut object = json!({"data": {"config": bomb}});
        let err = field(&mut object, &yaml_overrider()).unwrap_err();
        assert!(err.contains("parse limits"), "{err}");
    }
}
