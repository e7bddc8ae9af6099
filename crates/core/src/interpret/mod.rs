//! Karmada's resource interpreter: what a kind's replicas, requests, health and
//! dependencies are, and how a member's copy gets its share of the replicas.
//!
//! For each kind and operation the first answer wins, in Karmada's order: a
//! `ResourceInterpreterCustomization` in the repository (several for one kind are
//! taken in name order, each operation from the first that declares it), then one
//! shipped in the binary ([`shipped`]), then flotilla's native rules for the kinds it
//! knows. Scripts run in [`lua`]'s sandbox, bounded; the answer depends only on the
//! script and the object, so the render stays pure.

mod convert;
mod kube;
pub mod lua;
pub mod shipped;

use std::collections::HashMap;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use crate::model::ObjectKey;
use crate::model::selector::LabelSelector;
use crate::schedule::{Workload, capacity};

/// `spec` of a `config.karmada.io/v1alpha1` `ResourceInterpreterCustomization`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CustomizationSpec {
    /// The kind it interprets, by exact apiVersion and kind.
    pub target: Target,
    /// One script per operation; any may be left out.
    #[serde(default)]
    pub customizations: Rules,
}

/// `spec.target`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    /// `group/version`, or `v1`.
    pub api_version: String,
    /// Kind.
    pub kind: String,
}

/// `spec.customizations`: Karmada's field names.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rules {
    /// `Retain(desired, observed)`.
    pub retention: Option<Script>,
    /// `GetReplicas(obj)`.
    pub replica_resource: Option<Script>,
    /// `ReviseReplica(obj, replicas)`.
    pub replica_revision: Option<Script>,
    /// `ReflectStatus(observed)`.
    pub status_reflection: Option<Script>,
    /// `AggregateStatus(desired, statusItems)`.
    pub status_aggregation: Option<Script>,
    /// `InterpretHealth(observed)`.
    pub health_interpretation: Option<Script>,
    /// `GetDependencies(desired)`.
    pub dependency_interpretation: Option<Script>,
    /// `GetComponents(obj)`: read, not used (flotilla divides one replica count).
    pub component_resource: Option<Script>,
}

/// One operation's script.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Script {
    /// Lua 5.1 source defining the operation's global function.
    pub lua_script: Arc<str>,
}

/// The interpreter operations, with the function each script defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// `InterpretReplica`: `GetReplicas`.
    Replicas,
    /// `ReviseReplica`.
    Revise,
    /// `Retain`.
    Retain,
    /// `AggregateStatus`.
    AggregateStatus,
    /// `InterpretStatus`: `ReflectStatus`.
    ReflectStatus,
    /// `InterpretHealth`.
    Health,
    /// `InterpretDependency`: `GetDependencies`.
    Dependencies,
}

impl Operation {
    /// Every operation, for validation.
    pub const ALL: [Operation; 7] = [
        Operation::Replicas,
        Operation::Revise,
        Operation::Retain,
        Operation::AggregateStatus,
        Operation::ReflectStatus,
        Operation::Health,
        Operation::Dependencies,
    ];

    /// The global function the script defines.
    pub fn function(self) -> &'static str {
        match self {
            Operation::Replicas => "GetReplicas",
            Operation::Revise => "ReviseReplica",
            Operation::Retain => "Retain",
            Operation::AggregateStatus => "AggregateStatus",
            Operation::ReflectStatus => "ReflectStatus",
            Operation::Health => "InterpretHealth",
            Operation::Dependencies => "GetDependencies",
        }
    }

    /// This operation's script among `rules`.
    pub fn script(self, rules: &Rules) -> Option<&Script> {
        match self {
            Operation::Replicas => rules.replica_resource.as_ref(),
            Operation::Revise => rules.replica_revision.as_ref(),
            Operation::Retain => rules.retention.as_ref(),
            Operation::AggregateStatus => rules.status_aggregation.as_ref(),
            Operation::ReflectStatus => rules.status_reflection.as_ref(),
            Operation::Health => rules.health_interpretation.as_ref(),
            Operation::Dependencies => rules.dependency_interpretation.as_ref(),
        }
    }
}

/// A script that failed: which customization, which operation, on which object. The
/// object's content is never part of it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("ResourceInterpreterCustomization {customization}: {} of {object} failed: {message}", .operation.function())]
pub struct InterpretError {
    /// Its name (`(shipped)` for one in the binary).
    pub customization: String,
    /// The operation.
    pub operation: Operation,
    /// `Kind namespace/name` of the object.
    pub object: String,
    /// The script's error or the bound it passed.
    pub message: String,
}

/// A customization as the interpreter holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Customization {
    /// `metadata.name`, or `name (shipped)`.
    pub name: String,
    /// What it does.
    pub spec: CustomizationSpec,
}

/// The customizations of one revision, by target, in precedence order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Interpreter {
    /// By target kind; each list in precedence order.
    by_kind: HashMap<String, Vec<Arc<Customization>>>,
}

impl Interpreter {
    /// The repository's customizations (any order) over the shipped ones.
    pub fn new(repository: Vec<Arc<Customization>>) -> Interpreter {
        let mut repository = repository;
        repository.sort_by(|a, b| a.name.cmp(&b.name));
        let mut by_kind: HashMap<String, Vec<Arc<Customization>>> = HashMap::new();
        for c in repository.into_iter().chain(shipped::all().iter().cloned()) {
            by_kind.entry(c.spec.target.kind.clone()).or_default().push(c);
        }
        Interpreter { by_kind }
    }

    /// The script that answers `operation` for objects of `api_version` and `kind`, with
    /// the customization's name; `None` leaves it to the native rules.
    pub fn script(&self, api_version: &str, kind: &str, operation: Operation) -> Option<(&str, &Arc<str>)> {
        let list = self.by_kind.get(kind)?;
        list.iter()
            .filter(|c| c.spec.target.api_version == api_version)
            .find_map(|c| operation.script(&c.spec.customizations).map(|s| (c.name.as_str(), &s.lua_script)))
    }

    /// Whether any customization targets this kind.
    pub fn knows(&self, api_version: &str, kind: &str) -> bool {
        self.by_kind.get(kind).is_some_and(|list| list.iter().any(|c| c.spec.target.api_version == api_version))
    }

    fn run(
        &self,
        key: &ObjectKey,
        operation: Operation,
        args: &[&Value],
    ) -> Option<Result<Vec<Value>, InterpretError>> {
        let (name, script) = self.script(&key.api_version, &key.kind, operation)?;
        Some(lua::call(script, operation.function(), args).map_err(|message| InterpretError {
            customization: name.to_owned(),
            operation,
            object: key.to_string(),
            message,
        }))
    }

    fn fail(&self, key: &ObjectKey, operation: Operation, message: String) -> InterpretError {
        let name = self.script(&key.api_version, &key.kind, operation).map_or("", |(n, _)| n);
        InterpretError { customization: name.to_owned(), operation, object: key.to_string(), message }
    }

    /// `GetReplicas`: replicas and the requests of one replica, if a script answers.
    pub fn replicas(&self, key: &ObjectKey, object: &Value) -> Option<Result<Workload, InterpretError>> {
        let returned = match self.run(key, Operation::Replicas, &[object])? {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        let replicas = match returned.first() {
            Some(Value::Number(n)) if n.as_i64().is_some_and(|r| r >= 0) => n.as_i64().unwrap_or(0),
            Some(Value::Null) | None => 0,
            Some(other) => {
                return Some(Err(self.fail(
                    key,
                    Operation::Replicas,
                    format!("returned {other} replicas, not a whole number of zero or more"),
                )));
            }
        };
        let mut requests = capacity::Requests::new();
        if let Some(Value::Object(request)) = returned.get(1).and_then(|r| r.get("resourceRequest")) {
            for (name, quantity) in request {
                let text = quantity.as_str().map(str::to_owned).unwrap_or_else(|| quantity.to_string());
                match capacity::milli(&text) {
                    Some(m) => {
                        requests.insert(name.clone(), m);
                    }
                    None => {
                        return Some(Err(self.fail(
                            key,
                            Operation::Replicas,
                            format!("resourceRequest {name}: {text:?} is not a quantity"),
                        )));
                    }
                }
            }
        }
        Some(Ok(Workload { replicas, requests, completions: None }))
    }

    /// `ReviseReplica`: `object` revised to hold `replicas`, if a script answers.
    pub fn revise(&self, key: &ObjectKey, object: &Value, replicas: i64) -> Option<Result<Value, InterpretError>> {
        let returned = match self.run(key, Operation::Revise, &[object, &Value::from(replicas)])? {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        Some(match returned.into_iter().next() {
            Some(revised @ Value::Object(_)) => Ok(revised),
            _ => Err(self.fail(key, Operation::Revise, "returned no object".into())),
        })
    }

    /// `InterpretHealth` of an object as a member holds it, if a script answers.
    pub fn healthy(&self, key: &ObjectKey, observed: &Value) -> Option<Result<bool, InterpretError>> {
        let returned = match self.run(key, Operation::Health, &[observed])? {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        Some(match returned.first() {
            Some(Value::Bool(b)) => Ok(*b),
            _ => Err(self.fail(key, Operation::Health, "returned no boolean".into())),
        })
    }

    /// `Retain`: the desired object with what the member owns kept from `observed`.
    pub fn retain(&self, key: &ObjectKey, desired: &Value, observed: &Value) -> Option<Result<Value, InterpretError>> {
        let returned = match self.run(key, Operation::Retain, &[desired, observed])? {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        Some(match returned.into_iter().next() {
            Some(retained @ Value::Object(_)) => Ok(retained),
            _ => Err(self.fail(key, Operation::Retain, "returned no object".into())),
        })
    }

    /// `ReflectStatus`: the status a member's copy reports, if a script answers (Karmada
    /// takes `status` whole otherwise). A script returning nothing reports no status.
    pub fn reflect_status(&self, key: &ObjectKey, observed: &Value) -> Option<Result<Value, InterpretError>> {
        let returned = match self.run(key, Operation::ReflectStatus, &[observed])? {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        Some(Ok(returned.into_iter().next().unwrap_or(Value::Null)))
    }

    /// `AggregateStatus`: the template `desired` with its status made of the members'
    /// (`items`: Karmada's `statusItems`, each `clusterName`, `status`, `applied`,
    /// `health`), if a script answers; the status it returns.
    pub fn aggregate_status(
        &self,
        key: &ObjectKey,
        desired: &Value,
        items: &Value,
    ) -> Option<Result<Value, InterpretError>> {
        let returned = match self.run(key, Operation::AggregateStatus, &[desired, items])? {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        Some(match returned.into_iter().next() {
            Some(Value::Object(mut aggregated)) => Ok(aggregated.remove("status").unwrap_or(Value::Null)),
            _ => Err(self.fail(key, Operation::AggregateStatus, "returned no object".into())),
        })
    }

    /// `GetDependencies`: the objects that follow this one with `propagateDeps`, each
    /// named by apiVersion, kind, namespace (the object's when left out) and name, or,
    /// without a name, selected by `labelSelector` among the repository's objects of
    /// that kind in that namespace (Karmada's `DependentObjectReference`: a name wins
    /// over a selector).
    pub fn dependencies(&self, key: &ObjectKey, object: &Value) -> Option<Result<Dependencies, InterpretError>> {
        let returned = match self.run(key, Operation::Dependencies, &[object])? {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        let items = match returned.into_iter().next() {
            Some(Value::Array(items)) => items,
            Some(Value::Null) | None => Vec::new(),
            // An empty Lua table reads as an empty map.
            Some(Value::Object(m)) if m.is_empty() => Vec::new(),
            Some(other) => {
                return Some(Err(self.fail(
                    key,
                    Operation::Dependencies,
                    format!("returned {}, not a list", kind_of(&other)),
                )));
            }
        };
        let mut found = Dependencies::default();
        for item in items {
            let field = |f: &str| item.get(f).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned);
            let fail = |why: String| Some(Err(self.fail(key, Operation::Dependencies, why)));
            let (Some(api_version), Some(kind)) = (field("apiVersion"), field("kind")) else {
                return fail("a dependency needs apiVersion and kind".into());
            };
            let namespace = field("namespace").or_else(|| key.namespace.clone());
            if let Some(name) = field("name") {
                found.named.push(ObjectKey { api_version, kind, namespace, name });
                continue;
            }
            let Some(selector) = item.get("labelSelector") else {
                return fail("a dependency needs a name or a labelSelector".into());
            };
            match serde_json::from_value::<LabelSelector>(selector.clone()) {
                Ok(selector) => found.selected.push(Selected { api_version, kind, namespace, selector }),
                Err(e) => return fail(format!("labelSelector: {e}")),
            }
        }
        found.named.sort();
        found.named.dedup();
        Some(Ok(found))
    }
}

/// What a `GetDependencies` script names.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Dependencies {
    /// By name.
    pub named: Vec<ObjectKey>,
    /// By label selector, to be looked up among the revision's objects.
    pub selected: Vec<Selected>,
}

/// Dependencies named by a label selector.
#[derive(Debug, Clone, PartialEq)]
pub struct Selected {
    /// Their apiVersion.
    pub api_version: String,
    /// Their kind.
    pub kind: String,
    /// Their namespace.
    pub namespace: Option<String>,
    /// Their labels.
    pub selector: LabelSelector,
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "nil",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a table",
    }
}

#[cfg(test)]
mod tests;
