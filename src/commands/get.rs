//! `flotilla get`: one kind across members, like `karmadactl get --operation-scope members`.

use super::{Outcome, runtime};
use crate::cli::GetArgs;
use crate::clusters;

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
    let results = runtime()?.block_on(clusters::each(&kubeconfig, &names, trust, timeout, |client, _| async move {
        clusters::get::list(&client, query).await
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
