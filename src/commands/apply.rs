//! `flotilla apply`: render, then reconcile the members once.

use anyhow::bail;

use super::{Outcome, plan_within, report, runtime, scope};
use crate::cli::ApplyArgs;
use crate::clusters;

pub fn apply(args: ApplyArgs) -> anyhow::Result<Outcome> {
    // Rendering first: a repo that does not load changes nothing in any cluster.
    let scope = scope(&args.source)?;
    let plan = plan_within(&args.source, scope.as_ref())?;
    let kubeconfig = clusters::connect::read(&args.kubeconfig)?;
    let names: Vec<String> = if args.clusters.is_empty() {
        let (push, pull) = clusters::by_sync_mode(&plan);
        for name in pull {
            println!(
                "{name}: skipped (syncMode Pull: its agent applies it; name it with --cluster to apply from here)"
            );
        }
        push
    } else {
        if let Some(unknown) = args.clusters.iter().find(|c| !plan.clusters.contains_key(*c)) {
            bail!("cluster {unknown} is not declared in the repository");
        }
        args.clusters.clone()
    };
    let pool = clusters::connect::Pool::default();
    let source = crate::git::local_source(&args.source.repo, args.source.rev.as_deref());
    let options = clusters::Options {
        progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
        pool: &pool,
        instance: &args.reconcile.instance,
        trust: args.reconcile.trust.trust(),
        budget: flotilla_core::diff::PruneBudget { force: args.force_prune, ..Default::default() },
        concurrency: args.reconcile.concurrency,
        request_timeout: args.reconcile.request_timeout,
        cluster_timeout: args.reconcile.cluster_timeout,
        retry: true,
        fence: &Default::default(),
        source: &source,
        adopt: args.reconcile.adopt_inventory,
        scope: scope.as_ref(),
        acting_as: args.reconcile.service_account.as_deref(),
    };
    let outcomes = runtime()?.block_on(clusters::reconcile_all(&plan, &kubeconfig, &names, options));
    Ok(print_outcomes(report(&plan), outcomes))
}

/// One line per cluster on stdout; failures and prune refusals on stderr. Anything but a
/// clean cluster makes the outcome `Problems`.
fn print_outcomes(mut outcome: Outcome, outcomes: Vec<(String, clusters::Outcome)>) -> Outcome {
    for (cluster, result) in outcomes {
        match result {
            Ok(r) => {
                println!("{cluster}: {}", r.summary());
                for (key, why) in &r.failed {
                    eprintln!("error: {cluster}: {key}: {why}");
                }
                if let Some(refused) = &r.prune_refused {
                    eprintln!("warning: {cluster}: {refused}");
                }
                if !r.failed.is_empty() || r.prune_refused.is_some() {
                    outcome = Outcome::Problems;
                }
            }
            Err(e) => {
                println!("{cluster}: failed");
                eprintln!("error: {cluster}: {e}");
                outcome = Outcome::Problems;
            }
        }
    }
    outcome
}
