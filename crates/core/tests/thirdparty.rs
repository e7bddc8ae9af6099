//! Karmada's own test cases for the third-party customizations flotilla ships
//! (`src/interpret/thirdparty/karmada/<group>/<version>/<kind>/testdata/`, copied
//! unchanged), run in flotilla's Lua sandbox as Karmada's `thirdparty_test.go` runs them
//! in gopher-lua: each case calls its operation's function with the case's objects and
//! compares what the script returns with the case's `output`.
//!
//! Values are compared as Kubernetes compares them after a JSON round trip: empty
//! objects, empty arrays, empty strings and nulls are left out (Go's `omitempty`, and gopher-lua's empty
//! table, which is either), quantities compare by value, and a field the case marks
//! `{{EXCLUDE}}` is not compared.

use std::collections::BTreeMap;
use std::sync::Arc;

use flotilla_core::interpret::{Operation, lua, shipped};
use flotilla_core::schedule::capacity;
use serde_json::{Map, Value, json};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/interpret/thirdparty/karmada");
const EXCLUDE: &str = "{{EXCLUDE}}";

/// Cases that fail in flotilla's sandbox, each with why. All are `AggregateStatus`,
/// which flotilla reads and compiles but does not run (docs/karmada-compat.md). The test
/// fails if one of these starts passing, so the list stays true.
const KNOWN: &[(&str, &str)] = &[
    (
        "kubeflow.org/v1/Notebook AggregateStatus \"Notebook with multiple status items - all successful\"",
        "calls os.date for the time now: the sandbox has no clock",
    ),
    (
        "kubeflow.org/v1/Notebook AggregateStatus \"Notebook with multiple status items - some failed\"",
        "calls os.date for the time now: the sandbox has no clock",
    ),
    (
        "kubeflow.org/v1/Notebook AggregateStatus \"Notebook with multiple status items - all failed\"",
        "calls os.date for the time now: the sandbox has no clock",
    ),
    (
        "kubeflow.org/v1/Notebook AggregateStatus \"Notebook with multiple status items - mixed states with latest start time\"",
        "calls os.date for the time now: the sandbox has no clock",
    ),
    (
        "kubeflow.org/v1/TFJob AggregateStatus \"TFJob with two status items (both succeeded)\"",
        "calls os.date for the time now: the sandbox has no clock",
    ),
    (
        "kubeflow.org/v1/TFJob AggregateStatus \"TFJob with failed cluster\"",
        "calls os.date for the time now: the sandbox has no clock",
    ),
    (
        "kubeflow.org/v1/TFJob AggregateStatus \"TFJob with multiple replica types\"",
        "calls os.date for the time now: the sandbox has no clock",
    ),
    (
        "kubeflow.org/v2beta1/MPIJob AggregateStatus \"MPIJob with failed cluster\"",
        "conditions come out in the order of gopher-lua's table iteration, which Lua 5.1's differs from",
    ),
];

/// Every case of every shipped Karmada customization, by its operation.
#[test]
fn karmadas_thirdparty_test_cases_pass_in_the_sandbox() {
    let mut failures = Vec::new();
    let mut passed: BTreeMap<String, usize> = BTreeMap::new();
    let mut known_failed = 0;
    for (target, file) in test_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let cases: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
        for case in cases.into_iter().filter(|c| !c.is_null()) {
            let name = format!("{target} {} {}", case["operation"].as_str().unwrap_or("?"), case["name"]);
            let known = KNOWN.iter().find(|(prefix, _)| name == *prefix);
            match (run(&target, &case), known) {
                (Ok(None), _) => {}
                (Ok(Some(_)), Some((_, why))) => failures.push(format!("{name}: passes now; was known to fail: {why}")),
                (Ok(Some(op)), None) => *passed.entry(op).or_default() += 1,
                (Err(_), Some(_)) => known_failed += 1,
                (Err(why), None) => failures.push(format!("{name}: {why}")),
            }
        }
    }
    eprintln!("passed by operation: {passed:?}; known to fail: {known_failed}");
    assert_eq!(known_failed, KNOWN.len(), "every known failure is among the cases");
    assert!(failures.is_empty(), "{} cases failed:\n{}", failures.len(), failures.join("\n"));
    // Every operation Karmada tests is run here, and most of its cases.
    assert!(passed.values().sum::<usize>() > 500, "{passed:?}");
}

/// `(group/version/kind, testdata file)` for every shipped Karmada customization.
fn test_files() -> Vec<(String, String)> {
    let mut files = Vec::new();
    for (path, _) in shipped::FILES.iter().filter(|(p, _)| p.starts_with("karmada/")) {
        let target = path.trim_start_matches("karmada/").trim_end_matches("/customizations.yaml").to_owned();
        let dir = format!("{ROOT}/{target}/testdata");
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut names: Vec<String> = entries.map(|e| e.unwrap().path().display().to_string()).collect();
        names.sort();
        files.extend(names.into_iter().map(|n| (target.clone(), n)));
    }
    assert!(files.len() > 100, "testdata under {ROOT}");
    files
}

/// Runs one case: the operation it passed under, `None` for an operation flotilla's
/// interpreter has no function for (`InterpretComponent`).
fn run(target: &str, case: &Value) -> Result<Option<String>, String> {
    let operation = case["operation"].as_str().unwrap_or_default();
    let (op, args, outputs): (Operation, Vec<Value>, &[&str]) = match operation {
        "InterpretReplica" => (Operation::Replicas, vec![case["desiredObj"].clone()], &["replica", "requires"]),
        "ReviseReplica" => {
            (Operation::Revise, vec![case["desiredObj"].clone(), case["inputReplicas"].clone()], &["revised"])
        }
        "Retain" => (Operation::Retain, vec![case["desiredObj"].clone(), case["observedObj"].clone()], &["retained"]),
        "AggregateStatus" => (
            Operation::AggregateStatus,
            vec![case["desiredObj"].clone(), status_items(&case["statusItems"])],
            &["aggregatedStatus"],
        ),
        "InterpretStatus" => (Operation::ReflectStatus, vec![case["observedObj"].clone()], &["status"]),
        "InterpretHealth" => (Operation::Health, vec![case["observedObj"].clone()], &["healthy"]),
        // A few of Karmada's cases give this operation's object as `observedObj`.
        "InterpretDependency" => {
            let object = if case["desiredObj"].is_null() { &case["observedObj"] } else { &case["desiredObj"] };
            (Operation::Dependencies, vec![object.clone()], &["dependencies"])
        }
        "InterpretComponent" => return Ok(None),
        other => return Err(format!("unknown operation {other}")),
    };
    let script = script(target, op).ok_or("no script for the operation")?;
    let refs: Vec<&Value> = args.iter().collect();
    let returned = lua::call(&script, op.function(), &refs)?;
    let expected = case.get("output").and_then(Value::as_object).cloned().unwrap_or_default();
    for (at, key) in outputs.iter().enumerate() {
        let Some(want) = expected.get(*key) else { continue };
        let got = returned.get(at).cloned().unwrap_or(Value::Null);
        let got = if *key == "requires" { requirements(got) } else { got };
        let want = if *key == "requires" { requirements(want.clone()) } else { want.clone() };
        let mut excluded = Vec::new();
        let want = without_excluded(&want, "", &mut excluded, true);
        let got = without_excluded(&got, "", &mut excluded, false);
        let (want, got) = if *key == "dependencies" { (set(want), set(got)) } else { (want, got) };
        let (want, got) = (normal(&want), normal(&got));
        if want != got && !(is_empty(&want) && is_empty(&got)) {
            return Err(format!("{key}: expected {want}, got {got}"));
        }
    }
    Ok(Some(operation.to_owned()))
}

fn script(target: &str, op: Operation) -> Option<Arc<str>> {
    let (group_version, kind) = target.rsplit_once('/')?;
    shipped::all()
        .iter()
        .filter(|c| c.spec.target.api_version == group_version && c.spec.target.kind == kind)
        .find_map(|c| op.script(&c.spec.customizations).map(|s| s.lua_script.clone()))
}

/// Karmada passes `AggregatedStatusItem`s with the status as raw JSON, and nil when a
/// case has none; Lua sees the same.
fn status_items(items: &Value) -> Value {
    items.clone()
}

/// `ReplicaRequirements` with its quantities in thousandths, so `1` and `1000m` agree.
fn requirements(mut value: Value) -> Value {
    if let Some(requests) = value.get_mut("resourceRequest").and_then(Value::as_object_mut) {
        for quantity in requests.values_mut() {
            let milli = match &*quantity {
                Value::String(text) => capacity::milli(text),
                Value::Number(n) => n.as_f64().map(|f| (f * 1000.0).round() as i128),
                _ => None,
            };
            if let Some(milli) = milli {
                *quantity = json!(milli.to_string());
            }
        }
    }
    value
}

/// `value` without the paths marked `{{EXCLUDE}}` (collected from the expected value
/// first, then removed from the returned one).
fn without_excluded(value: &Value, path: &str, excluded: &mut Vec<String>, collecting: bool) -> Value {
    match value {
        Value::Object(fields) => {
            let mut kept = Map::new();
            for (k, v) in fields {
                let at = format!("{path}.{k}");
                if collecting && v.as_str() == Some(EXCLUDE) {
                    excluded.push(at);
                    continue;
                }
                if !collecting && excluded.contains(&at) {
                    continue;
                }
                kept.insert(k.clone(), without_excluded(v, &at, excluded, collecting));
            }
            Value::Object(kept)
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| without_excluded(v, &format!("{path}.{i}"), excluded, collecting))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Empty objects, empty arrays and nulls left out; integral floats as integers.
fn normal(value: &Value) -> Value {
    match value {
        Value::Object(fields) => {
            Value::Object(fields.iter().map(|(k, v)| (k.clone(), normal(v))).filter(|(_, v)| !is_empty(v)).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(normal).collect()),
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0 && f.abs() < 9e15) => {
            json!(n.as_f64().unwrap_or_default() as i64)
        }
        other => other.clone(),
    }
}

/// Dependencies as a set: once each, sorted. flotilla treats them as a set, and the
/// order a script returns them in follows its VM's table iteration, which differs
/// between gopher-lua and Lua 5.1 when a script collects them in a table by name.
fn set(value: Value) -> Value {
    let Value::Array(items) = value else { return value };
    let mut seen: Vec<Value> = Vec::new();
    for item in items {
        if !seen.contains(&item) {
            seen.push(item);
        }
    }
    seen.sort_by_key(|v| v.to_string());
    Value::Array(seen)
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}
