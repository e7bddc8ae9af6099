//! `policy.karmada.io/v1alpha1` OverridePolicy and ClusterOverridePolicy, field for field
//! as Karmada's CRDs declare them; unknown fields are rejected.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::policy::{ClusterAffinity, ResourceSelector};

/// `OverrideSpec`, shared by OverridePolicy and ClusterOverridePolicy.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OverrideSpec {
    /// Empty selects everything in scope.
    #[serde(default)]
    pub resource_selectors: Vec<ResourceSelector>,
    /// Rules, each for a set of clusters.
    #[serde(default)]
    pub override_rules: Vec<OverrideRule>,
    /// Deprecated single-rule form (with `overriders`).
    #[serde(default)]
    pub target_cluster: Option<ClusterAffinity>,
    /// Deprecated single-rule form (with `targetCluster`).
    #[serde(default)]
    pub overriders: Option<Overriders>,
}

impl OverrideSpec {
    /// The rules to apply: `overrideRules`, or the deprecated pair as one rule.
    pub fn rules(&self) -> Vec<OverrideRule> {
        if self.override_rules.is_empty() {
            self.overriders
                .iter()
                .map(|o| OverrideRule { target_cluster: self.target_cluster.clone(), overriders: o.clone() })
                .collect()
        } else {
            self.override_rules.clone()
        }
    }
}

/// `overrideRules[]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OverrideRule {
    /// Nil means every cluster.
    #[serde(default)]
    pub target_cluster: Option<ClusterAffinity>,
    /// What to change.
    pub overriders: Overriders,
}

/// `overriders`: applied image → command → args → labels → annotations → field → plaintext.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Overriders {
    /// Raw JSON patch operations.
    #[serde(default)]
    pub plaintext: Vec<PlaintextOverrider>,
    /// Image reference edits.
    #[serde(default)]
    pub image_overrider: Vec<ImageOverrider>,
    /// Container command edits.
    #[serde(default)]
    pub command_overrider: Vec<CommandArgsOverrider>,
    /// Container args edits.
    #[serde(default)]
    pub args_overrider: Vec<CommandArgsOverrider>,
    /// `metadata.labels` edits.
    #[serde(default)]
    pub labels_overrider: Vec<MapOverrider>,
    /// `metadata.annotations` edits.
    #[serde(default)]
    pub annotations_overrider: Vec<MapOverrider>,
    /// Edits inside a string field holding JSON or YAML.
    #[serde(default)]
    pub field_overrider: Vec<FieldOverrider>,
}

/// Operators of plaintext, image, label/annotation and field overriders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Operator {
    /// Add or append.
    Add,
    /// Remove.
    Remove,
    /// Replace.
    Replace,
}

/// `plaintext[]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlaintextOverrider {
    /// JSON pointer.
    pub path: String,
    /// Patch operation.
    pub operator: Operator,
    /// Required for add and replace, forbidden for remove.
    #[serde(default)]
    pub value: Option<Value>,
}

/// `imageOverrider[]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImageOverrider {
    /// Exactly which image string; without it every container of known workload kinds.
    #[serde(default)]
    pub predicate: Option<ImagePredicate>,
    /// Which part of the reference.
    pub component: ImageComponent,
    /// add, remove or replace.
    pub operator: Operator,
    /// Operand.
    #[serde(default)]
    pub value: Option<String>,
}

/// `imageOverrider[].predicate`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImagePredicate {
    /// Path of the image string, e.g. `/spec/template/spec/containers/0/image`.
    pub path: String,
}

/// Parts of an image reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum ImageComponent {
    /// The registry host.
    Registry,
    /// The repository path.
    Repository,
    /// The tag (or digest).
    Tag,
}

/// `commandOverrider[]` / `argsOverrider[]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommandArgsOverrider {
    /// Containers with this name.
    pub container_name: String,
    /// `add` appends, `remove` drops equal elements.
    pub operator: Operator,
    /// Operand list.
    #[serde(default)]
    pub value: Vec<String>,
}

/// `labelsOverrider[]` / `annotationsOverrider[]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MapOverrider {
    /// add sets keys; replace and remove touch existing keys only.
    pub operator: Operator,
    /// Keys and values.
    #[serde(default)]
    pub value: BTreeMap<String, String>,
}

/// `fieldOverrider[]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FieldOverrider {
    /// JSON pointer of a string field.
    pub field_path: String,
    /// Operations when the string holds JSON.
    #[serde(default)]
    pub json: Vec<SubPatch>,
    /// Operations when the string holds YAML.
    #[serde(default)]
    pub yaml: Vec<SubPatch>,
}

/// One operation inside a field overrider.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubPatch {
    /// JSON pointer relative to the parsed field.
    pub sub_path: String,
    /// Patch operation.
    pub operator: Operator,
    /// Operand.
    #[serde(default)]
    pub value: Option<Value>,
}
