//! Karmada's `kube` Lua library (`local kube = require("kube")`), the functions its
//! customizations call, computed as flotilla computes the same facts for native kinds.

use mlua::{Lua, LuaSerdeExt, MultiValue, Table, Value as Lua_};
use serde_json::{Value, json};

use super::convert;
use crate::schedule::capacity;

pub(super) fn library(lua: &Lua) -> mlua::Result<Table> {
    let kube = lua.create_table()?;
    kube.set("resourceAdd", lua.create_function(|_, args: MultiValue| resource_add(args))?)?;
    kube.set("getResourceQuantity", lua.create_function(|_, q: Lua_| quantity_number(&q))?)?;
    kube.set(
        "accuratePodRequirements",
        lua.create_function(|lua, template: Lua_| {
            let array = lua.array_metatable();
            let template = convert::from_lua(lua, &array, template)?;
            convert::to_lua(lua, &array, &pod_requirements(&template))
        })?,
    )?;
    kube.set(
        "getPodDependencies",
        lua.create_function(|lua, (template, namespace): (Lua_, Lua_)| {
            let array = lua.array_metatable();
            let template = convert::from_lua(lua, &array, template)?;
            let namespace = match namespace {
                Lua_::Nil => "default".to_owned(),
                Lua_::String(s) => s.to_str()?.to_owned(),
                Lua_::Integer(i) => i.to_string(),
                other => {
                    return Err(mlua::Error::runtime(format!(
                        "namespace: expected a string, got {}",
                        other.type_name()
                    )));
                }
            };
            let deps = pod_dependencies(&template, &namespace);
            convert::to_lua(lua, &array, &Value::Array(deps))
        })?,
    )?;
    Ok(kube)
}

/// A quantity argument: nil is zero, a string is parsed as Kubernetes does.
fn milli_of(value: &Lua_) -> mlua::Result<i128> {
    match value {
        Lua_::Nil => Ok(0),
        Lua_::String(s) => {
            let text = s.to_str()?;
            capacity::milli(&text).ok_or_else(|| mlua::Error::runtime(format!("{text:?} is not a resource quantity")))
        }
        other => Err(mlua::Error::runtime(format!("a resource quantity is a string, not a {}", other.type_name()))),
    }
}

/// Karmada's `resourceAdd`: the sum as `resource.Quantity.Add` and `String` give it, in
/// the format of the first quantity that is not zero (`Add` to a zero takes the other's
/// format): binary when it has a binary suffix such as `Mi`.
fn resource_add(args: MultiValue) -> mlua::Result<String> {
    let mut total = 0i128;
    let mut binary = None;
    for arg in &args {
        let milli = milli_of(arg)?;
        total = total.saturating_add(milli);
        if let (None, Lua_::String(s), false) = (binary, arg, milli == 0) {
            binary = Some(s.to_str()?.ends_with('i'));
        }
    }
    Ok(canonical(total, binary.unwrap_or(false)))
}

/// A quantity in Kubernetes' canonical form: the largest suffix that leaves a whole
/// number, powers of 1024 for a binary quantity (falling back to a plain number when
/// none divides it), powers of 1000 otherwise, thousandths with `m`.
pub(super) fn canonical(milli: i128, binary: bool) -> String {
    if milli % 1000 != 0 || milli == 0 {
        return format_milli(milli);
    }
    let units = milli / 1000;
    let (base, suffixes): (i128, [&str; 6]) =
        if binary { (1024, ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]) } else { (1000, ["k", "M", "G", "T", "P", "E"]) };
    let mut best = (units, "");
    let mut scale = base;
    for suffix in suffixes {
        if units % scale != 0 {
            break;
        }
        best = (units / scale, suffix);
        scale = scale.saturating_mul(base);
    }
    format!("{}{}", best.0, best.1)
}

fn quantity_number(value: &Lua_) -> mlua::Result<f64> {
    let milli = milli_of(value)?;
    if milli < 0 {
        return Err(mlua::Error::runtime("a negative resource quantity"));
    }
    Ok(milli as f64 / 1000.0)
}

/// A quantity as whole units, or thousandths with `m`.
pub(super) fn format_milli(milli: i128) -> String {
    if milli % 1000 == 0 { (milli / 1000).to_string() } else { format!("{milli}m") }
}

/// Karmada's `GenerateReplicaRequirements` of a pod template: the requests of one pod,
/// its node claim (selector, tolerations, required node affinity) and priority class.
pub(super) fn pod_requirements(template: &Value) -> Value {
    let pod = json!({"spec": template.get("spec").cloned().unwrap_or(Value::Null)});
    let requests = crate::schedule::workload_of("", "Pod", &pod).requests;
    let mut out = serde_json::Map::new();
    if !requests.is_empty() {
        let request: serde_json::Map<String, Value> =
            requests.into_iter().map(|(name, milli)| (name, Value::String(format_milli(milli)))).collect();
        out.insert("resourceRequest".into(), Value::Object(request));
    }
    let spec = template.get("spec");
    let mut claim = serde_json::Map::new();
    for (from, to) in [("nodeSelector", "nodeSelector"), ("tolerations", "tolerations")] {
        if let Some(v) = spec.and_then(|s| s.get(from)).filter(|v| !is_empty(v)) {
            claim.insert(to.into(), v.clone());
        }
    }
    if let Some(v) =
        spec.and_then(|s| s.pointer("/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution"))
    {
        claim.insert("hardNodeAffinity".into(), v.clone());
    }
    if !claim.is_empty() {
        out.insert("nodeClaim".into(), Value::Object(claim));
    }
    if let Some(class) = spec.and_then(|s| s.get("priorityClassName")).and_then(Value::as_str).filter(|c| !c.is_empty())
    {
        out.insert("priorityClassName".into(), class.into());
    }
    Value::Object(out)
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// Karmada's `GetDependenciesFromPodTemplate`: what a pod made from `template` in
/// `namespace` refers to, as dependency references.
pub(super) fn pod_dependencies(template: &Value, namespace: &str) -> Vec<Value> {
    let pod = json!({"spec": template.get("spec").cloned().unwrap_or(Value::Null)});
    crate::dependencies::references("", "Pod", &pod)
        .into_iter()
        .map(|(kind, name)| json!({"apiVersion": "v1", "kind": kind, "namespace": namespace, "name": &*name}))
        .collect()
}
