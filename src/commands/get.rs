//! `flotilla get`: one kind across members, like `karmadactl get --operation-scope members`.

use serde_json::Value;

use super::{Outcome, runtime};
use crate::cli::{GetArgs, ListFormat};
use crate::clusters;

/// Where an object came from, on every object `-o json|yaml` prints: karmada-search's
/// annotation for the same thing.
pub const FROM_CLUSTER: &str = "resource.karmada.io/cached-from-cluster";

pub fn get(args: GetArgs) -> anyhow::Result<Outcome> {
    let kubeconfig = clusters::connect::read(&args.kubeconfig)?;
    let names: Vec<String> = if args.clusters.is_empty() {
        kubeconfig.contexts.iter().map(|c| c.name.clone()).collect()
    } else {
        args.clusters.clone()
    };
    let trust = args.trust.trust();
    let timeout = args.request_timeout;
    let namespace =
        if args.all_namespaces { None } else { Some(args.namespace.clone().unwrap_or_else(|| "default".into())) };
    let query = clusters::get::Query { kind: args.kind.clone(), namespace, selector: args.selector.clone() };
    let query = &query;
    let wide = match args.output {
        Some(format @ (ListFormat::Json | ListFormat::Yaml)) => {
            return objects(&kubeconfig, &names, &args, query, format);
        }
        wide => wide.is_some(),
    };
    let results = runtime()?.block_on(clusters::each(&kubeconfig, &names, trust, timeout, |client, _| async move {
        clusters::get::list(&client, query, wide).await
    }));
    let mut outcome = Outcome::Clean;
    let mut listings = Vec::new();
    for (name, result) in names.into_iter().zip(results) {
        match result {
            Ok(Some(listing)) => listings.push((name, listing)),
            Ok(None) => eprintln!("note: {name} does not serve {:?}", args.kind),
            Err(e) => {
                eprintln!("error: {name}: {e}");
                outcome = Outcome::Problems;
            }
        }
    }
    let table = clusters::get::format(&listings, args.all_namespaces);
    if table.lines().count() <= 1 && outcome == Outcome::Clean {
        eprintln!("No resources found");
    } else {
        print!("{table}");
    }
    Ok(outcome)
}

/// `-o json|yaml`: one v1 List of every member's objects, in member order, each
/// annotated with its member; a Secret's values are masked (`kubectl get` against the
/// member shows them, to whoever may read them there).
fn objects(
    kubeconfig: &kube::config::Kubeconfig,
    names: &[String],
    args: &GetArgs,
    query: &clusters::get::Query,
    format: ListFormat,
) -> anyhow::Result<Outcome> {
    let (trust, timeout) = (args.trust.trust(), args.request_timeout);
    let results = runtime()?.block_on(clusters::each(kubeconfig, names, trust, timeout, |client, _| async move {
        clusters::get::objects(&client, query).await
    }));
    let mut outcome = Outcome::Clean;
    let mut items = Vec::new();
    for (name, result) in names.iter().zip(results) {
        match result {
            Ok(Some(objects)) => items.extend(objects.into_iter().map(|o| annotated(o, name))),
            Ok(None) => eprintln!("note: {name} does not serve {:?}", args.kind),
            Err(e) => {
                eprintln!("error: {name}: {}", flotilla_core::escape::visible(&e));
                outcome = Outcome::Problems;
            }
        }
    }
    let list = serde_json::json!({ "apiVersion": "v1", "kind": "List", "metadata": {}, "items": items });
    print!("{}", super::status::structured(&list, format)?);
    Ok(outcome)
}

/// `object` marked as `cluster`'s, its values masked if it is a Secret.
fn annotated(mut object: Value, cluster: &str) -> Value {
    if object["apiVersion"] == "v1" && object["kind"] == "Secret" {
        flotilla_core::plan_diff::mask_secret_values(&mut object);
    }
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = metadata.entry("annotations").or_insert_with(|| Value::Object(Default::default()));
        if let Some(annotations) = annotations.as_object_mut() {
            annotations.insert(FROM_CLUSTER.into(), Value::from(cluster));
        }
    }
    object
}
