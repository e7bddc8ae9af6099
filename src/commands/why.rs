//! `flotilla why`: the explanation of one object, offline, from one pure function
//! (`flotilla_core::why`) that the fleet page's workload view shares.

use anyhow::bail;
use flotilla_core::model::{ObjectKey, Plan};

use super::{Outcome, plan_in_state, require_declared, scope};
use crate::cli::{WhyArgs, WhyFormat};

pub fn why(args: WhyArgs) -> anyhow::Result<Outcome> {
    let mut state = None;
    let plan = plan_in_state(&args.source, scope(&args.source)?.as_ref(), |s| {
        state = Some(s.clone());
        Ok(s)
    })?;
    require_declared(&args.clusters, &[&plan])?;
    let key = resolve(&plan, &args.object)?;
    let state = state.unwrap_or_default();
    let mut explanation = flotilla_core::why::explain(&plan, &state, &key).expect("resolved in this plan");
    match args.output {
        WhyFormat::Text => {
            // Every name and message in it is made visible: it reaches a terminal.
            print!("{}", flotilla_core::why::text(&explanation, &args.clusters));
        }
        WhyFormat::Json => {
            if !args.clusters.is_empty() {
                explanation.members.retain(|name, _| args.clusters.contains(name));
            }
            println!("{}", serde_json::to_string_pretty(&explanation)?);
        }
    }
    Ok(Outcome::Clean)
}

/// The template `object` (`KIND/NAMESPACE/NAME` or `KIND/NAME`) names: its kind as
/// kubectl spells kinds (any case, plural, short name, `kind.group`).
fn resolve(plan: &Plan, object: &str) -> anyhow::Result<ObjectKey> {
    let parts: Vec<&str> = object.split('/').collect();
    let (kind, namespace, name) = match parts.as_slice() {
        [kind, namespace, name] => (*kind, Some(*namespace), *name),
        [kind, name] => (*kind, None, *name),
        _ => bail!("{object:?}: name the object as KIND/NAMESPACE/NAME, or KIND/NAME when it is cluster-scoped"),
    };
    let (kind, group) = match kind.split_once('.') {
        Some((kind, group)) => (kind.to_lowercase(), Some(group)),
        None => (kind.to_lowercase(), None),
    };
    let kind = SHORT.iter().find(|(short, _)| *short == kind).map_or(kind, |(_, long)| (*long).to_owned());
    let matches = |key: &ObjectKey| {
        let k = key.kind.to_lowercase();
        (k == kind || format!("{k}s") == kind || format!("{k}es") == kind)
            && group.is_none_or(|g| key.group() == g)
            && key.namespace.as_deref() == namespace
            && key.name == name
    };
    let found: Vec<&ObjectKey> = plan.loaded.templates.iter().map(|t| &t.key).filter(|k| matches(k)).collect();
    match found.as_slice() {
        [one] => Ok((*one).clone()),
        [] => bail!("{object}: the repository declares no such object"),
        many => {
            let listed: Vec<String> = many.iter().map(|k| k.to_string()).collect();
            bail!("{object} names {} objects ({}): add the group, as KIND.GROUP", many.len(), listed.join("; "))
        }
    }
}

/// kubectl's short names of the kinds a fleet places most.
const SHORT: &[(&str, &str)] = &[
    ("deploy", "deployment"),
    ("svc", "service"),
    ("cm", "configmap"),
    ("ns", "namespace"),
    ("sa", "serviceaccount"),
    ("sts", "statefulset"),
    ("ds", "daemonset"),
    ("ing", "ingress"),
    ("hpa", "horizontalpodautoscaler"),
    ("cj", "cronjob"),
    ("pdb", "poddisruptionbudget"),
];
